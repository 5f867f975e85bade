// Picks one option per setting from measured figures, the choice never going back down as the
// setting grows: where a rise in the setting can only favour later options, a choice that went
// back would be noise between options measured within a percent of each other.
// (`bench speculation --tune-head`: the settings are batches, the options a confidence head's
// thresholds from the most drafts verified to the fewest, the figures speedups.)
#pragma once

#include <cstddef>
#include <vector>

namespace brigade::bench {

/// For each row of `figures` (a setting, in ascending order; every row as long as the first),
/// the column (an option) such that the columns never decrease from row to row and the sum of
/// the chosen figures is the largest; ties go to the smaller column. Empty for no rows.
std::vector<size_t> monotone_choice(const std::vector<std::vector<double>>& figures);

}  // namespace brigade::bench
