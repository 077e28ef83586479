# Runs PROGRAM on the embedded cluster and then under --simulate=SEED for
# each of SEEDS, and fails unless every run prints the same answer. What
# differs by nature is set aside first: the simulated run's closing line,
# the node a message names ("local", "node-0"), and a wait under 100 ms
# measured in real time against the same wait in virtual time.
function(answer_of out)
  execute_process(COMMAND ${PROGRAM} ${ARGN} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} ${ARGN} exited ${rc}:\n${text}${err}")
  endif()
  string(REGEX REPLACE "on node [^ :]+" "on node N" text "${text}")
  string(REGEX REPLACE "on (local|node-[0-9]+) " "on node N " text "${text}")
  string(REGEX REPLACE "took [0-9][0-9]? ms" "took under 100 ms" text
         "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

answer_of(real)
foreach(seed IN LISTS SEEDS)
  answer_of(simulated --simulate=${seed})
  if(NOT simulated STREQUAL real)
    message(FATAL_ERROR "${PROGRAM} --simulate=${seed} answered\n"
                        "${simulated}\nwhere the embedded cluster answered\n"
                        "${real}")
  endif()
endforeach()
message("the same answer on the embedded cluster and under --simulate="
        "${SEEDS}:\n${real}")
