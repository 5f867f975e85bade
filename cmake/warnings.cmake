# Warnings apply to brigade's own targets through this interface library.
add_library(brigade_warnings INTERFACE)
target_compile_options(brigade_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>)
if(BRIGADE_WERROR)
  target_compile_options(brigade_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

add_library(brigade_cpu_flags INTERFACE)
if(BRIGADE_NATIVE)
  target_compile_options(brigade_cpu_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
else()
  target_compile_options(brigade_cpu_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-mavx2 -mfma -mf16c>)
endif()
# Kernels rely on explicit FMA intrinsics for a fixed rounding order: forbid the compiler from
# contracting other expressions differently in different translation units.
target_compile_options(brigade_cpu_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)

# Sanitizer flags, used by the ASan/UBSan copies of the loader and tokenizer tests.
add_library(brigade_sanitize INTERFACE)
target_compile_options(brigade_sanitize INTERFACE
  -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g)
target_link_options(brigade_sanitize INTERFACE -fsanitize=address,undefined)
