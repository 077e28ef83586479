# The installed lumen finds the installed pages:
#   cmake -DBUILD_DIR=... -DPREFIX=... -P installed_page.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} failed: ${rc}")
endif()
execute_process(COMMAND ${PREFIX}/bin/lumen playground ml_scratch04
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(STRIP "${out}" out)
if(NOT rc EQUAL 0 OR NOT out STREQUAL "file://${PREFIX}/share/lumen/playground/ml_scratch04.html")
  message(FATAL_ERROR "the installed lumen playground said '${out}' (exit ${rc}): ${err}")
endif()
if(NOT EXISTS ${PREFIX}/share/lumen/playground/ml_scratch04.html)
  message(FATAL_ERROR "the page it names is not installed")
endif()
