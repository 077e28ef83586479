# Compiles SOURCE and passes only if the compiler rejects it with EXPECT in
# its output:
#   cmake -DCXX=... -DINCLUDE=... -DSOURCE=... -DEXPECT=... -P this
execute_process(COMMAND ${CXX} -std=c++17 -fsyntax-only -I${INCLUDE} ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected")
endif()
string(FIND "${out}${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE} was rejected without the message "
                      "'${EXPECT}':\n${err}")
endif()
