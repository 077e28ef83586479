# Runs `LUMEN sim PROGRAM --seeds=SEEDS -- ARGS` one run at a time and
# JOBS runs at once, and fails unless both name failed seeds and say the
# same, in the same order: runs end in any order, the report is by seed.
function(report_of out jobs)
  execute_process(COMMAND ${LUMEN} sim ${PROGRAM} --seeds=${SEEDS}
                          --jobs=${jobs} -- ${ARGS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR NOT text MATCHES "seed [0-9]+: exit 1")
    message(FATAL_ERROR "lumen sim --jobs=${jobs} exited ${rc}, where a "
                        "failed seed was expected:\n${text}${err}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

report_of(alone 1)
report_of(together ${JOBS})
if(NOT together STREQUAL alone)
  message(FATAL_ERROR "--jobs=${JOBS} reported\n${together}\nwhere one run "
                      "at a time reported\n${alone}")
endif()
message("the same report one run at a time and ${JOBS} at once:\n${alone}")
