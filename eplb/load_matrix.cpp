#include "eplb/load_matrix.hpp"

#include <cmath>
#include <string>

namespace brigade::eplb {

status validate_load_matrix(const load_matrix& load) {
  if (load.empty()) {
    return error(errc::invalid_argument, "load matrix has no layers: give one row per MoE layer");
  }
  const size_t experts = load.front().size();
  if (experts == 0) {
    return error(errc::invalid_argument, "load matrix layer 0 has no experts");
  }
  for (size_t layer = 0; layer < load.size(); ++layer) {
    if (load[layer].size() != experts) {
      return error(errc::invalid_argument, "load matrix is ragged: layer " + std::to_string(layer) +
                                               " has " + std::to_string(load[layer].size()) +
                                               " experts, layer 0 has " + std::to_string(experts) +
                                               "; every layer needs the same expert count");
    }
    for (size_t e = 0; e < experts; ++e) {
      const double tokens = load[layer][e];
      if (!std::isfinite(tokens) || tokens < 0) {
        return error(errc::invalid_argument,
                     "load of layer " + std::to_string(layer) + " expert " + std::to_string(e) +
                         " is " + std::to_string(tokens) +
                         "; loads must be finite and non-negative token counts");
      }
    }
  }
  return ok_status();
}

}  // namespace brigade::eplb
