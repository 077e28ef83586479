# LUMEN_SANITIZE=address,undefined builds everything (ours and the tests) with
# the named sanitizers. UBSan reports are made fatal so that ctest sees them.
set(LUMEN_SANITIZE "" CACHE STRING
    "Comma-separated sanitizers to build with, e.g. address,undefined")
if(LUMEN_SANITIZE)
  string(REPLACE "," ";" lumen_sanitizers "${LUMEN_SANITIZE}")
  foreach(s IN LISTS lumen_sanitizers)
    if(NOT s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "LUMEN_SANITIZE: unknown sanitizer '${s}'; "
                          "use a comma-separated subset of address,undefined,thread,leak")
    endif()
  endforeach()
  set(lumen_san_flags "-fsanitize=${LUMEN_SANITIZE}" -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
  add_compile_options(${lumen_san_flags})
  add_link_options(${lumen_san_flags})
endif()
