# Components and the layering the build enforces.
#
# No target has the repository root on its include path. Instead each folder
# gets an include "view": a directory in the build tree,
# ${CMAKE_BINARY_DIR}/views/<view>/, holding symlinks to exactly the source
# folders it may include. `#include "src/log.h"` keeps its spelling and
# resolves only where src/ is allowed; anything else fails to compile
# ("fatal error: worker/worker_int.h: No such file or directory").
#
# What each component folder may include (besides <rdmaps/*.h> and the files
# of its own folder). Dependencies point one way, down this list:
#   tools, examples -> (public API only) -> worker, server
#     -> control, http -> transport -> src
set(RPS_VIEW_src       src)
set(RPS_VIEW_transport transport src)
set(RPS_VIEW_http      http src)
set(RPS_VIEW_control   control transport src)
set(RPS_VIEW_server    server control http transport src)
set(RPS_VIEW_worker    worker control http transport src)
# Tests see what they test, plus tests/ (shared test helpers).
foreach(c src transport http control server worker)
  set(RPS_VIEW_test_${c} ${RPS_VIEW_${c}} tests)
endforeach()

# TEMPORARY ALLOWANCE (delete once these use only the public API): folders of
# tools/ and examples/ that still include internal headers (src/*.h). Each
# sees src/ and its own folder, and links the static library's internals.
# Everything in tools/ and examples/ that is not listed here sees include/
# only. The installed-package test (tests/integration/install.sh) skips
# building the listed folders against the installed package.
set(RPS_LEGACY_INTERNAL_USERS "")

# rps_view(NAME FOLDER...): the include view NAME (an INTERFACE target
# rps_view_NAME) made of FOLDERs (paths relative to the source root).
function(rps_view name)
  set(dir ${CMAKE_BINARY_DIR}/views/${name})
  file(REMOVE_RECURSE ${dir}) # removes the links, never what they point to
  foreach(f ${ARGN})
    if(NOT IS_DIRECTORY ${CMAKE_SOURCE_DIR}/${f})
      message(FATAL_ERROR "include view ${name}: no folder ${f}")
    endif()
    get_filename_component(parent ${dir}/${f} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${f} ${dir}/${f} SYMBOLIC)
  endforeach()
  add_library(rps_view_${name} INTERFACE)
  target_include_directories(rps_view_${name} INTERFACE ${dir})
endfunction()

foreach(v src transport http control server worker)
  rps_view(${v} ${RPS_VIEW_${v}})
  rps_view(test_${v} ${RPS_VIEW_test_${v}})
endforeach()
foreach(u ${RPS_LEGACY_INTERNAL_USERS})
  string(MAKE_C_IDENTIFIER "legacy_${u}" v)
  rps_view(${v} src ${u})
endforeach()
# install.sh reads this list
string(REPLACE ";" "\n" legacy_lines "${RPS_LEGACY_INTERNAL_USERS}")
file(WRITE ${CMAKE_BINARY_DIR}/legacy-internal-users.txt "${legacy_lines}\n")

# rps_component(COMPONENT [SUBFOLDER...]): the OBJECT library rps_COMPONENT of
# every .c file in the folder COMPONENT/ (and COMPONENT/SUBFOLDER/), except
# program entry points (*_main.c), compiled with the view of COMPONENT.
function(rps_component comp)
  set(srcs "")
  foreach(d . ${ARGN})
    file(GLOB s CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${comp}/${d}/*.c)
    list(APPEND srcs ${s})
  endforeach()
  list(FILTER srcs EXCLUDE REGEX "_main\\.c$")
  set(name rps_${comp})
  if(NOT srcs)
    set(stub ${CMAKE_CURRENT_BINARY_DIR}/${name}_empty.c)
    file(WRITE ${stub} "/* component with no sources yet */\ntypedef int ${name}_empty_unit;\n")
    set(srcs ${stub})
  endif()
  add_library(${name} OBJECT ${srcs})
  target_link_libraries(${name} PUBLIC rps_deps PRIVATE rps_view_${comp})
endfunction()

# rps_program(NAME MAINFILE COMPONENT): a program of a component's folder in
# build/bin, linked against librdmaps, compiled with the component's view.
function(rps_program name main comp)
  add_executable(${name} ${main})
  target_link_libraries(${name} PRIVATE rps_all rps_view_${comp})
  install(TARGETS ${name} RUNTIME DESTINATION bin)
endfunction()

# rps_legacy_user(TARGET FOLDER): TARGET (of FOLDER in RPS_LEGACY_INTERNAL_USERS)
# may include src/*.h and FOLDER/; it links the library's internals.
function(rps_legacy_user target folder)
  if(NOT folder IN_LIST RPS_LEGACY_INTERNAL_USERS)
    message(FATAL_ERROR "${target}: ${folder} is not in RPS_LEGACY_INTERNAL_USERS")
  endif()
  string(MAKE_C_IDENTIFIER "legacy_${folder}" v)
  target_link_libraries(${target} PRIVATE rps_all rps_view_${v})
endfunction()

# The views cannot stop `#include "../worker/x.h"`: a check in every build can.
add_custom_target(rps_check_includes ALL
  COMMAND ${CMAKE_SOURCE_DIR}/cmake/check_includes.sh ${CMAKE_SOURCE_DIR}
  COMMENT "include paths do not climb out of their folder" VERBATIM)
