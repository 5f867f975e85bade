# Every dependency comes from Debian packages (see scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(yaml-cpp REQUIRED)

# CAF 0.17 ships no CMake config: find its headers and libraries by hand (Debian installs them
# under the standard prefixes).
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
find_library(CAF_IO_LIBRARY caf_io REQUIRED)
if(NOT TARGET CAF::core)
  add_library(CAF::core UNKNOWN IMPORTED)
  set_target_properties(CAF::core PROPERTIES IMPORTED_LOCATION ${CAF_CORE_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR} INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(CAF::io UNKNOWN IMPORTED)
  set_target_properties(CAF::io PROPERTIES IMPORTED_LOCATION ${CAF_IO_LIBRARY}
    INTERFACE_LINK_LIBRARIES CAF::core)
endif()

# UCX is the data plane (Debian libucx-dev ships ucx-config.cmake: ucx::ucp, ucx::ucs).
find_package(ucx 1.13 REQUIRED CONFIG)
# Boost.Beast and Asio (header-only) for the HTTP server.
find_package(Boost 1.74 REQUIRED)

find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# ICU: Unicode normalization (NFC) and character properties for the tokenizer.
pkg_check_modules(ICU REQUIRED IMPORTED_TARGET icu-uc)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)

if(BRIGADE_TESTS)
  find_package(Catch2 2 REQUIRED)
  include(Catch)
  # Debian's numpy is installed for the system interpreter, which a pyenv shim may hide.
  find_program(BRIGADE_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT BRIGADE_PYTHON)
    find_program(BRIGADE_PYTHON NAMES python3 REQUIRED)
  endif()
  find_program(BRIGADE_NODE NAMES node nodejs)
  find_program(BRIGADE_NPM NAMES npm)
endif()

if(BRIGADE_BENCH)
  # OpenBLAS is the yardstick for the expert FFN kernel in `brigade bench engine`.
  find_path(OPENBLAS_INCLUDE_DIR cblas.h PATHS /usr/include/x86_64-linux-gnu/openblas-pthread
            /usr/include/openblas REQUIRED)
  find_library(OPENBLAS_LIBRARY NAMES openblas PATHS
               /usr/lib/x86_64-linux-gnu/openblas-pthread REQUIRED)
  add_library(brigade_openblas INTERFACE)
  target_include_directories(brigade_openblas SYSTEM INTERFACE ${OPENBLAS_INCLUDE_DIR})
  target_link_libraries(brigade_openblas INTERFACE ${OPENBLAS_LIBRARY})
endif()
