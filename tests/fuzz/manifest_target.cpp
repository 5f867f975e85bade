// Fuzz target: a cluster manifest (YAML). Every input must give a manifest or an error, never an
// exception or a sanitizer report.
#include "config/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto m =
      brigade::config::parse_manifest(std::string(reinterpret_cast<const char*>(data), size), "f");
  (void)m;
  return 0;
}
