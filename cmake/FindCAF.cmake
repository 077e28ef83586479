# Finds the C++ Actor Framework (CAF 0.17). Debian's libcaf-dev ships neither a
# CMake package nor a pkg-config file, so the headers and libraries are located
# by hand and exposed as the imported targets CAF::core, CAF::io and
# CAF::openssl (the last only when the library is present).
include(FindPackageHandleStandardArgs)
find_package(Threads REQUIRED)

find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY NAMES caf_core)
find_library(CAF_IO_LIBRARY NAMES caf_io)
find_library(CAF_OPENSSL_LIBRARY NAMES caf_openssl)

if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1" caf_version_num
         "${caf_version_line}")
  if(caf_version_num)
    math(EXPR caf_major "${caf_version_num} / 10000")
    math(EXPR caf_minor "(${caf_version_num} / 100) % 100")
    math(EXPR caf_patch "${caf_version_num} % 100")
    set(CAF_VERSION "${caf_major}.${caf_minor}.${caf_patch}")
  endif()
endif()

find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
  VERSION_VAR CAF_VERSION)

if(CAF_FOUND AND NOT TARGET CAF::core)
  add_library(CAF::core UNKNOWN IMPORTED)
  set_target_properties(CAF::core PROPERTIES
    IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(CAF::io UNKNOWN IMPORTED)
  set_target_properties(CAF::io PROPERTIES
    IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
    INTERFACE_LINK_LIBRARIES CAF::core)
  if(CAF_OPENSSL_LIBRARY)
    add_library(CAF::openssl UNKNOWN IMPORTED)
    set_target_properties(CAF::openssl PROPERTIES
      IMPORTED_LOCATION "${CAF_OPENSSL_LIBRARY}"
      INTERFACE_LINK_LIBRARIES CAF::io)
  endif()
endif()
mark_as_advanced(CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
                 CAF_OPENSSL_LIBRARY)
