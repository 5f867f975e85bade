// out_of_contact_at: which faults strike a node the coordinator already counts as lost.
#include <catch2/catch.hpp>
#include <vector>

#include "chaos/event_watch.hpp"
#include "chaos/runner.hpp"

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

TEST_CASE("a node that stopped on its own is out of contact until it rejoins", "[chaos]") {
  // chaos --random 1 --random-from 89 --seed 9191: n3 stopped by SIGTERM, restarted under its
  // name and cut off from the coordinator 2 ms later, before it could rejoin.
  const std::vector<seen_event> seen = {
      {5004, "node_leaving", "n3", "", ""},
      {5004, "role_unreachable", "n3", "decode-1", ""},
      {7808, "node_rejoined", "n3", "", ""},
  };
  CHECK_FALSE(out_of_contact_at(seen, "n3", 4901));
  CHECK(out_of_contact_at(seen, "n3", 5720));
  CHECK_FALSE(out_of_contact_at(seen, "n3", 7900));
}

TEST_CASE("a kill sent while its node is cut off from the coordinator lands at the heal",
          "[chaos]") {
  using namespace brigade::chaos;
  // chaos --random 1 --random-from 9 --seed 9191: n2 cut off (both planes) for 3 s at 202 ms,
  // its shard killed at 207 ms, the death seen at 3209 ms, 4 ms after the heal.
  scenario s;
  fault_spec cut;
  cut.action = fault_spec::kind::partition;
  cut.target = {fault_target::kind::node, "n2"};
  cut.for_ms = 3000;
  fault_spec kill;
  kill.action = fault_spec::kind::kill;
  kill.target = {fault_target::kind::role, "expert_shard"};
  s.faults = {cut, kill};
  std::vector<fault_result> faults(2);
  faults[0].at_ms = 202;
  faults[0].healed_ms = 3205;
  faults[1].at_ms = 207;
  const std::vector<seen_event> seen = {
      {1605, "node_suspected", "n2", "", ""},
      {3209, "role_died", "n2", "expert_shard-1", ""},
  };
  CHECK(kill_lands_at(s, faults, 1, "expert_shard-1", seen) == 3205);
  // A cut of the data plane alone does not hold the kill back, nor a cut of another node, nor
  // one that healed before the kill.
  s.faults[0].plane = "data";
  CHECK(kill_lands_at(s, faults, 1, "expert_shard-1", seen) == 207);
  s.faults[0].plane = "both";
  s.faults[0].target.name = "n1";
  CHECK(kill_lands_at(s, faults, 1, "expert_shard-1", seen) == 207);
  s.faults[0].target.name = "n2";
  faults[0].healed_ms = 205;
  CHECK(kill_lands_at(s, faults, 1, "expert_shard-1", seen) == 207);
  // Only kills of actors wait: the cut itself counts from its start.
  faults[0].healed_ms = 3205;
  CHECK(kill_lands_at(s, faults, 0, "", seen) == 202);
  // A node stopped (SIGSTOP) holds the kill until it runs again (chaos --random 1
  // --random-from 25 --seed 2727).
  s.faults[0].action = fault_spec::kind::stop;
  CHECK(kill_lands_at(s, faults, 1, "expert_shard-1", seen) == 3205);
}

TEST_CASE("an event's time is its age on arrival, before the arrival on the steady clock",
          "[chaos]") {
  using brigade::chaos::event_at_ms;
  // Stamped 150 ms before it arrived, 1,000 ms into the run.
  CHECK(event_at_ms(1'700'000'000'850, 1'700'000'001'000, 1000) == 850);
  // The system clock stepped 8 s forward since the run started: the event's age is what it was,
  // and so is its time in the run (the stamp against the run's start would say 8,850).
  CHECK(event_at_ms(1'700'000'008'850, 1'700'000'009'000, 1000) == 850);
  // A stamp after the arrival (the clock stepped back in between) counts as the arrival.
  CHECK(event_at_ms(1'700'000'001'200, 1'700'000'001'000, 1000) == 1000);
  // A coordinator paused for 15 s pushes its events late: their age says when they happened.
  CHECK(event_at_ms(1'700'000'002'000, 1'700'000'017'000, 16000) == 1000);
}
