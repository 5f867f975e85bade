// The small random MoE checkpoint the topology tests run on (support/small_model_spec.hpp), written
// to a directory of its own.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "model/model_writer.hpp"
#include "support/small_model_spec.hpp"
#include "support/temp_dir.hpp"

namespace brigade::testing {

struct small_model {
  temp_dir dir;
  small_model(const std::string& tag, uint64_t seed) : dir{tag} {
    REQUIRE(model::write_random_model(small_model_spec(seed), dir.path()).ok());
  }
};

}  // namespace brigade::testing
