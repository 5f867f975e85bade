// The tuning's choice per batch: the best sum of figures with a choice that never goes back down.
#include "bench/monotone_choice.hpp"

#include <catch2/catch.hpp>

using brigade::bench::monotone_choice;

TEST_CASE("monotone_choice takes each row's best where that already rises", "[bench][tuning]") {
  CHECK(monotone_choice({{1.3, 1.2, 1.1}, {1.0, 1.1, 1.05}, {0.7, 0.8, 0.9}}) ==
        std::vector<size_t>{0, 1, 2});
  CHECK(monotone_choice({{2.0}}) == std::vector<size_t>{0});
  CHECK(monotone_choice({}).empty());
}

TEST_CASE("monotone_choice never goes back down, and gives up the least to hold that",
          "[bench][tuning]") {
  // Row 1 alone would take column 2 and row 2 column 1: either row 2 rises to 2 (losing 0.01)
  // or row 1 stays at 1 (losing 0.05); the first loses less.
  CHECK(monotone_choice({{1.0, 0.9, 0.8}, {0.80, 0.85, 0.90}, {0.70, 0.75, 0.74}}) ==
        std::vector<size_t>{0, 2, 2});
  // The same with the losses the other way round: row 1 stays at column 1.
  CHECK(monotone_choice({{1.0, 0.9, 0.8}, {0.80, 0.89, 0.90}, {0.70, 0.75, 0.70}}) ==
        std::vector<size_t>{0, 1, 1});
  // A first row that wants the last column holds every later row there.
  CHECK(monotone_choice({{0.1, 0.2, 1.5}, {0.9, 0.1, 0.1}}) == std::vector<size_t>{2, 2});
  // Ties go to the smaller column.
  CHECK(monotone_choice({{1.0, 1.0}, {1.0, 1.0}}) == std::vector<size_t>{0, 0});
}
