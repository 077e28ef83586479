# lumen_link_whole(<program> <library>...) links all of each of Lumen's
# libraries into <program> and exports their symbols: libraries that
# `lumen start --code-path` loads register through the runtime in the
# program that loads them, and name nothing of it themselves.
#
# In a shared build (the sanitized one) the program is linked from the
# libraries' objects, as a position-dependent executable: a sanitized start
# spent half its time relocating the two shared libraries (5.7M
# relocations, each a write to a fresh page of their data), and the suites
# start `lumen` for every node, head and simulated seed. Linked so,
# `lumen --help` starts in 0.12 s instead of 0.24 s, with 18.7k page
# faults instead of 61.7k.
function(lumen_link_whole program)
  set_target_properties(${program} PROPERTIES ENABLE_EXPORTS ON)
  if(NOT BUILD_SHARED_LIBS)
    target_link_libraries(${program} PRIVATE ${ARGN})
    foreach(lib IN LISTS ARGN)
      # An override: lumen_actors names lumen_runtime without the feature.
      set_property(TARGET ${program}
                   PROPERTY LINK_LIBRARY_OVERRIDE_${lib} WHOLE_ARCHIVE)
    endforeach()
    return()
  endif()
  list(JOIN ARGN "|" ours)
  foreach(lib IN LISTS ARGN)
    target_sources(${program} PRIVATE $<TARGET_OBJECTS:${lib}>)
    target_include_directories(${program} PRIVATE
      $<TARGET_PROPERTY:${lib},INTERFACE_INCLUDE_DIRECTORIES>)
    # What the library links, but not the others given (their objects are
    # here): a shared copy loaded beside them would be a second runtime.
    target_link_libraries(${program} PRIVATE
      "$<FILTER:$<TARGET_GENEX_EVAL:${lib},$<TARGET_PROPERTY:${lib},LINK_LIBRARIES>>,EXCLUDE,^(${ours})$>")
  endforeach()
  target_link_options(${program} PRIVATE -no-pie)
endfunction()
