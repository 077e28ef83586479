# Warnings are errors in our own code. CAF's and Boost's headers come in as
# SYSTEM includes (imported targets), so their warnings never reach us.
add_library(lumen_warnings INTERFACE)
target_compile_options(lumen_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Werror>)
# GCC 12 warns inside its own AVX-512 intrinsics once Eigen's vector code
# (exp, the packet loads) is inlined into ours with -march=native (GCC bug
# 105593, fixed in 13): false positives we cannot reach from our code. For
# the ML layer and what builds on it in this tree, not for users' code.
add_library(lumen_eigen_warnings INTERFACE)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND
   CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(lumen_eigen_warnings INTERFACE
    -Wno-maybe-uninitialized -Wno-uninitialized)
endif()
