# rps_component(NAME DIR...): an OBJECT library of every .c file in DIRs,
# except program entry points (*_main.c).
function(rps_component name)
  set(srcs "")
  foreach(d ${ARGN})
    file(GLOB s CONFIGURE_DEPENDS ${d}/*.c)
    list(APPEND srcs ${s})
  endforeach()
  list(FILTER srcs EXCLUDE REGEX "_main\\.c$")
  if(NOT srcs)
    set(stub ${CMAKE_CURRENT_BINARY_DIR}/${name}_empty.c)
    file(WRITE ${stub} "/* component with no sources yet */\ntypedef int ${name}_empty_unit;\n")
    set(srcs ${stub})
  endif()
  add_library(${name} OBJECT ${srcs})
  target_link_libraries(${name} PUBLIC rps_deps)
endfunction()

# rps_program(NAME MAINFILE): a program in build/bin linked against librdmaps.
function(rps_program name main)
  add_executable(${name} ${main})
  target_link_libraries(${name} PRIVATE rps_all)
  install(TARGETS ${name} RUNTIME DESTINATION bin)
endfunction()
