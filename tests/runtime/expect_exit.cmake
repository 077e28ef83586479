# Runs PROGRAM with ARGS and checks its exit code and output:
#   cmake -DPROGRAM=... -DARGS=... -DEXPECT_RC=2 -DEXPECT_OUTPUT=text -P this
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${PROGRAM} ${args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 60)
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: exit code ${rc}, expected "
                      "${EXPECT_RC}\nstdout: ${out}\nstderr: ${err}")
endif()
string(FIND "${out}${err}" "${EXPECT_OUTPUT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: output lacks '${EXPECT_OUTPUT}'\n"
                      "stdout: ${out}\nstderr: ${err}")
endif()
