# Installs the built project into a scratch prefix, then configures, builds
# and runs tests/install as an outside project would: the consumer, then a
# cluster of the installed `lumen` whose head and node load the project's
# --code-path library, with its driver (run_cluster.sh).
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DWITH_LUMEN=1
#         -P check_install.cmake
set(prefix "${WORK_DIR}/prefix")
set(home "${WORK_DIR}/home")
set(build "${WORK_DIR}/build")
# The installed `lumen` in a HOME of its own: `lumen stop` there ends this
# test's head and node and nothing else.
set(in_home ${CMAKE_COMMAND} -E env "HOME=${home}"
            "PATH=${prefix}/bin:$ENV{PATH}")

# A run ended by ctest's timeout leaves its cluster running, recorded in
# the scratch HOME: stopped before that goes.
if(EXISTS "${prefix}/bin/lumen" AND EXISTS "${home}/.lumen")
  execute_process(COMMAND ${in_home} lumen stop --grace 2 TIMEOUT 30
                  OUTPUT_QUIET ERROR_QUIET)
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${home}")

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${build}"
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
run(${CMAKE_COMMAND} --build "${build}")
run("${build}/consumer")
if(NOT last_output MATCHES "consumer: 7")
  message(FATAL_ERROR "unexpected consumer output: ${last_output}")
endif()
# The runtime alone (a tree without actors/) installs no `lumen` program.
if(NOT WITH_LUMEN)
  return()
endif()

# Fails with everything the cluster said: the script's output, the head's
# and the nodes' logs; after stopping the cluster.
function(cluster_failed why details)
  execute_process(COMMAND ${in_home} lumen stop --grace 2 TIMEOUT 30
                  OUTPUT_VARIABLE stop_out ERROR_VARIABLE stop_err)
  set(logs "")
  file(GLOB log_files "${home}/.lumen/logs/*.log")
  foreach(f IN LISTS log_files)
    file(READ "${f}" text)
    string(APPEND logs "--- ${f}\n${text}")
  endforeach()
  message(FATAL_ERROR "${why}\n${details}\n--- lumen stop\n${stop_out}"
                      "${stop_err}\n${logs}")
endfunction()

# On a loaded machine the whole run takes a few seconds; the timeout is for
# a hang.
execute_process(COMMAND ${in_home} sh "${SOURCE_DIR}/run_cluster.sh" "${build}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 120)
if(NOT rc EQUAL 0)
  set(head_out "")
  if(EXISTS "${build}/head.txt")
    file(READ "${build}/head.txt" head_out)
  endif()
  cluster_failed("run_cluster.sh failed (${rc})"
                 "--- lumen start --head\n${head_out}--- output\n${out}${err}")
endif()
if(NOT out MATCHES "driver: ok" OR
   NOT out MATCHES "Stopped the head and 1 node")
  cluster_failed("run_cluster.sh: unexpected output" "${out}${err}")
endif()

# A library that links lumen::runtime carries a second runtime, unless that
# is a shared library (a sanitizer build): `lumen start` refuses it before
# it looks for a head.
file(GLOB_RECURSE static_runtime "${prefix}/liblumen_runtime.a")
if(static_runtime)
  execute_process(COMMAND ${in_home} lumen start --address 127.0.0.1:1
                          --code-path "${build}/libjob_with_runtime.so"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 60)
  if(NOT rc EQUAL 2 OR
     NOT "${out}${err}" MATCHES "link the library with lumen::code_path")
    cluster_failed("lumen start took a library linking lumen::runtime (${rc})"
                   "${out}${err}")
  endif()
endif()
