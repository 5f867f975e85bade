# Warnings apply to brigade's own targets through this interface library.
add_library(brigade_warnings INTERFACE)
target_compile_options(brigade_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>)
if(BRIGADE_WERROR)
  target_compile_options(brigade_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

# Instruction sets. All of brigade is compiled for one fixed baseline, x86-64-v3 (AVX2, FMA, F16C,
# BMI2), so one binary runs on every such machine. Wider kernels select their instruction set per
# function (gpu/cpu/gemm_avx512.cpp) and are chosen at run time (gpu/cpu/kernel_path.hpp).
# BRIGADE_NATIVE only tunes scheduling for the build machine: -march=native would let the compiler
# use AVX-512 anywhere (3780 zmm instructions in the binary, checked), and the binary would then
# die with SIGILL on an AVX2-only node.
add_library(brigade_cpu_flags INTERFACE)
target_compile_options(brigade_cpu_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=x86-64-v3>)
if(BRIGADE_NATIVE)
  target_compile_options(brigade_cpu_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-mtune=native>)
endif()
# Kernels rely on explicit FMA intrinsics for a fixed rounding order: forbid the compiler from
# contracting other expressions differently in different translation units.
target_compile_options(brigade_cpu_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)

# Sanitizer flags, used by the ASan/UBSan copies of the loader and tokenizer tests.
add_library(brigade_sanitize INTERFACE)
target_compile_options(brigade_sanitize INTERFACE
  -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g)
target_link_options(brigade_sanitize INTERFACE -fsanitize=address,undefined)
