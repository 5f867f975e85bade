#include "actors/retention_table.hpp"

#include <chrono>

namespace brigade::actors {

kvcache::retention retention_table(const std::vector<kvcache::scenario_retention>& scenarios) {
  kvcache::retention table;
  for (const auto& s : scenarios)
    (void)table.set(s.name, std::chrono::seconds(s.retention_s));
  return table;
}

}  // namespace brigade::actors
