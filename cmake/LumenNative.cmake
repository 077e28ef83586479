# Lumen is compiled for the CPU it is built on, so that Eigen and the
# collectives' reductions use its vector units (AVX2 and FMA where it has
# them) instead of the baseline x86-64 SSE2. Off builds for any CPU of the
# architecture, e.g. a binary shipped to older machines.
option(LUMEN_NATIVE "Compile for this machine's CPU (-march=native)" ON)
if(LUMEN_NATIVE)
  include(CheckCXXCompilerFlag)
  check_cxx_compiler_flag(-march=native LUMEN_HAS_MARCH_NATIVE)
  if(LUMEN_HAS_MARCH_NATIVE)
    add_compile_options(-march=native)
  endif()
endif()
# Our loops may take a square root without setting errno (nothing reads
# it), which lets the compiler vectorize them: the optimizer's update.
add_compile_options(-fno-math-errno)
