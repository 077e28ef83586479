# Warnings are errors in our own code. CAF's and Boost's headers come in as
# SYSTEM includes (imported targets), so their warnings never reach us.
add_library(lumen_warnings INTERFACE)
target_compile_options(lumen_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Werror>)
