# Compiles SOURCE and passes only if the compiler rejects it with EXPECT in
# its output; with -DONLY_ERROR=ON, in its one and only error:
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
if(ONLY_ERROR)
  # Semicolons would split CMake's list of matches.
  string(REPLACE ";" "," output "${out}${err}")
  string(REGEX MATCHALL "error: [^\n]*" errors "${output}")
  list(LENGTH errors count)
  list(GET errors 0 first)
  string(FIND "${first}" "${EXPECT}" at)
  if(NOT count EQUAL 1 OR at EQUAL -1)
    message(FATAL_ERROR "${SOURCE} must be rejected with one error saying "
                        "'${EXPECT}', not ${count}:\n${err}")
  endif()
endif()
