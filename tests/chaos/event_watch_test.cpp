// out_of_contact_at: which faults strike a node the coordinator already counts as lost.
#include <catch2/catch.hpp>
#include <vector>

#include "chaos/event_watch.hpp"

using brigade::chaos::out_of_contact_at;
using brigade::chaos::seen_event;

TEST_CASE("a node is out of contact from its loss until it rejoins", "[chaos]") {
  const std::vector<seen_event> seen = {
      {100, "node_joined", "n2", "", ""},       {340, "node_lost", "n2", "", ""},
      {345, "role_died", "n1", "decode-0", ""}, {5180, "node_rejoined", "n2", "", ""},
      {6000, "node_lost", "n1", "", ""},
  };
  CHECK_FALSE(out_of_contact_at(seen, "n2", 200));   // before the loss
  CHECK(out_of_contact_at(seen, "n2", 340));         // the loss itself
  CHECK(out_of_contact_at(seen, "n2", 2020));        // restarted, stopped before it could rejoin
  CHECK_FALSE(out_of_contact_at(seen, "n2", 5180));  // back
  CHECK_FALSE(out_of_contact_at(seen, "n2", 7000));
  // Other nodes' events do not count.
  CHECK_FALSE(out_of_contact_at(seen, "n1", 2020));
  CHECK(out_of_contact_at(seen, "n1", 6000));
  CHECK_FALSE(out_of_contact_at(seen, "n3", 9000));
  CHECK_FALSE(out_of_contact_at({}, "n2", 9000));
}
