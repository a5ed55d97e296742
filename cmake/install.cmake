# cmake --install: library, headers, programs, rdmaps.pc and find_package(rdmaps).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS rdmaps rdmaps_static EXPORT rdmapsTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/rdmaps DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT rdmapsTargets NAMESPACE rdmaps:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rdmaps)

set(RPS_PC_REQUIRES_PRIVATE "openblas libzip libmicrohttpd libisal jansson libssl libcrypto")
if(RPS_WITH_JEMALLOC)
  string(APPEND RPS_PC_REQUIRES_PRIVATE " jemalloc")
endif()
if(RPS_WITH_RDMA)
  string(APPEND RPS_PC_REQUIRES_PRIVATE " libibverbs librdmacm")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/rdmaps.pc.in ${CMAKE_BINARY_DIR}/rdmaps.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/rdmaps.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/rdmapsConfig.cmake.in
  ${CMAKE_BINARY_DIR}/rdmapsConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rdmaps)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/rdmapsConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/rdmapsConfig.cmake ${CMAKE_BINARY_DIR}/rdmapsConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rdmaps)
