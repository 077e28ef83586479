# LUMEN_SANITIZE=address,undefined builds everything (ours and the tests) with
# the named sanitizers. UBSan stays recoverable so that suppressions can
# apply, and halts on the first report it does not suppress
# (sanitizer_options.cpp), so a report still fails its test.
set(LUMEN_SANITIZE "" CACHE STRING
    "Comma-separated sanitizers to build with, e.g. address,undefined")
add_library(lumen_sanitizer_options INTERFACE)
if(LUMEN_SANITIZE)
  string(REPLACE "," ";" lumen_sanitizers "${LUMEN_SANITIZE}")
  foreach(s IN LISTS lumen_sanitizers)
    if(NOT s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "LUMEN_SANITIZE: unknown sanitizer '${s}'; "
                          "use a comma-separated subset of address,undefined,thread,leak")
    endif()
  endforeach()
  # Sanitized code is large (ASan with UBSan: ~0.5 GB for the runtime and
  # the ML layer): linked statically into each of ~70 test programs it filled
  # 24 GB and ran CI's disk full. Shared, it is there once.
  if(NOT DEFINED BUILD_SHARED_LIBS)
    set(BUILD_SHARED_LIBS ON)
  endif()
  add_compile_options(-fsanitize=${LUMEN_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${LUMEN_SANITIZE})
  if("undefined" IN_LIST lumen_sanitizers)
    # Compiled once and linked into each program: the suppressions file's
    # path, a flag of this one source, keeps the other sources' flags the
    # same in every build folder (compiler-cache hits in another clone).
    add_library(lumen_sanitizer_options_object OBJECT
      "${CMAKE_CURRENT_LIST_DIR}/sanitizer_options.cpp")
    target_compile_definitions(lumen_sanitizer_options_object PRIVATE
      "LUMEN_UBSAN_SUPP=\"${CMAKE_CURRENT_LIST_DIR}/ubsan.supp\"")
    target_sources(lumen_sanitizer_options INTERFACE
      $<TARGET_OBJECTS:lumen_sanitizer_options_object>)
  endif()
endif()
