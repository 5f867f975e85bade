// `brigade top`'s frames, drawn from JSON shaped like the server's (deploy/status_json.cpp,
// deploy/rebalancer.cpp, the supervisor's events), and its advice on failures.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/top_source.hpp"
#include "cli/top_view.hpp"

namespace {

using brigade::cli::display_width;
using brigade::cli::frame_size;
using brigade::cli::render_top;
using brigade::cli::step_means;
using brigade::cli::top_snapshot;
using nlohmann::json;

json role(const std::string& name, const std::string& kind, int queue, int in_flight,
          double last_ms, int steps, json detail = json::object()) {
  return {{"name", name},
          {"role", kind},
          {"queue_depth", queue},
          {"in_flight", in_flight},
          {"last_step_ms", last_ms},
          {"steps", steps},
          {"detail", std::move(detail)}};
}

json status_json() {
  return json::array({role("router", "router", 0, 2, 0.0, 10),
                      role("expert_shard-0", "expert_shard", 1, 0, 0.5, 40),
                      role("expert_shard-1", "expert_shard", 0, 0, 0.25, 40),
                      role("prefill-0", "prefill", 3, 1, 12.5, 7),
                      role("decode-0", "decode", 0, 2, 4.0, 20, {{"step_ms_total", 60.0}})});
}

json experts_json() {
  return {{"epoch", 2},
          {"shards", 3},
          {"slots_per_shard", 3},
          {"sample_interval_steps", 4},
          {"windows",
           json::array({{{"window", 1}, {"shard_load", {10, 20, 30}}, {"balancedness", 0.0}},
                        {{"window", 2}, {"shard_load", {20, 20, 20}}, {"balancedness", 1.0}},
                        {{"window", 3}, {"shard_load", {40, 60, 100}}, {"balancedness", 0.5}}})},
          {"balancedness", 0.5},
          {"rebalances", {{"adopted", 1}, {"rolled_back", 0}, {"rejected", 2}}},
          {"migration", nullptr}};
}

json event(int seq, const std::string& kind, int epoch) {
  return {{"seq", seq},
          {"unix_ms", 1700000000000LL + seq * 1000},
          {"kind", kind},
          {"epoch", epoch},
          {"predicted_balancedness", 0.9},
          {"measured_balancedness", 0.0},
          {"moved_slots", 4},
          {"duration_s", 0.0},
          {"detail", "seed 5"}};
}

top_snapshot snapshot() {
  top_snapshot s;
  s.url = "http://127.0.0.1:8000";
  s.frame = 3;
  s.status = status_json();
  s.experts = experts_json();
  s.events = {event(1, "migration_started", 3), event(2, "migration_finished", 3)};
  return s;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines)
    out += l + "\n";
  return out;
}

// The line that starts with `prefix`, or "".
std::string line_of(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const auto& l : lines) {
    if (l.rfind(prefix, 0) == 0) return l;
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a frame holds a row per role with its queue depth and in-flight count") {
  step_means means;
  means.observe(status_json());
  const auto lines = render_top(snapshot(), means, frame_size{100, 40});
  const std::string prefill = line_of(lines, "prefill-0");
  CHECK(has(prefill, "prefill"));
  CHECK(has(prefill, "      3          1      12.5      12.5          7"));
  for (const char* name : {"router", "expert_shard-0", "expert_shard-1", "decode-0"})
    CHECK_FALSE(line_of(lines, name).empty());
  CHECK(has(lines.at(1), "QUEUE  IN FLIGHT   LAST MS   MEAN MS"));
}

TEST_CASE("roles keep the server's order of kinds and are sorted by number within a kind") {
  top_snapshot s = snapshot();
  s.status = json::array(
      {role("router", "router", 0, 0, 0, 1), role("expert_shard-10", "expert_shard", 0, 0, 0, 1),
       role("expert_shard-2", "expert_shard", 0, 0, 0, 1), role("decode-0", "decode", 0, 0, 0, 1),
       role("expert_shard-1", "expert_shard", 0, 0, 0, 1)});
  const auto lines = render_top(s, step_means{}, frame_size{100, 40});
  std::vector<std::string> names;
  for (size_t i = 2; i < 7; ++i)
    names.push_back(lines.at(i).substr(0, lines.at(i).find(' ')));
  CHECK(names == std::vector<std::string>{"router", "expert_shard-1", "expert_shard-2",
                                          "expert_shard-10", "decode-0"});
}

TEST_CASE("the mean step time is the decode worker's own and else sampled as steps advance") {
  step_means means;
  const json decode = role("decode-0", "decode", 0, 0, 4.0, 20, {{"step_ms_total", 60.0}});
  CHECK(means.mean_ms(decode) == Approx(3.0));
  const json first = role("prefill-0", "prefill", 0, 0, 10.0, 1);
  CHECK(means.mean_ms(first) < 0);
  means.observe(json::array({first}));
  means.observe(json::array({first}));  // No step since: no new sample.
  const json second = role("prefill-0", "prefill", 0, 0, 20.0, 3);
  means.observe(json::array({second}));
  CHECK(means.mean_ms(second) == Approx(15.0));
}

TEST_CASE("each shard gets a bar of the last window with the max marked and the mean shown") {
  const auto lines = render_top(snapshot(), step_means{}, frame_size{80, 40});
  const std::string title = line_of(lines, "SHARD LOAD");
  CHECK(has(title, "window 3"));
  CHECK(has(title, "max 100 on shard 2"));
  CHECK(has(title, "mean 67"));
  const std::string max_row = line_of(lines, "shard 2");
  CHECK(has(max_row, "████"));
  CHECK(has(max_row, " 100 max"));
  const std::string low_row = line_of(lines, "shard 0");
  CHECK(has(low_row, "|"));  // Its bar ends before the mean.
  CHECK(has(low_row, "  40"));
  CHECK_FALSE(has(low_row, "max"));
  CHECK(display_width(max_row) == display_width(low_row) + 4);
}

TEST_CASE("a load bar takes exactly its cells whatever the value") {
  for (double v : {0.0, 0.01, 0.3, 0.5, 0.99, 1.0, 2.0, -1.0}) {
    CHECK(display_width(brigade::cli::load_bar(v, 1.0, 20, 10)) == 20);
  }
  CHECK(brigade::cli::load_bar(1.0, 1.0, 4, 2) == "████");
  CHECK(brigade::cli::load_bar(0.5, 1.0, 4, 3) == "██ |");
  CHECK(brigade::cli::load_bar(0.0625, 1.0, 2, -1) == "▏ ");
  CHECK(brigade::cli::load_bar(1.0, 0.0, 3, -1) == "   ");
}

TEST_CASE("the balancedness sparkline runs from the lowest block at 0 to the full block at 1") {
  CHECK(brigade::cli::sparkline({0.0, 0.5, 1.0}) == "▁▅█");
  CHECK(brigade::cli::sparkline({-3.0, 7.0}) == "▁█");
  const auto lines = render_top(snapshot(), step_means{}, frame_size{80, 40});
  const std::string line = line_of(lines, "BALANCEDNESS");
  CHECK(has(line, "▁█▅"));
  CHECK(has(line, "0.500 last of 3 windows"));
  const std::string layout = line_of(lines, "layout epoch 2");
  CHECK(has(layout, "no migration running"));
  CHECK(has(layout, "adopted 1"));
}

TEST_CASE("a long history keeps the newest windows that fit the width") {
  top_snapshot s = snapshot();
  s.experts["windows"] = json::array();
  for (int w = 0; w < 200; ++w)
    s.experts["windows"].push_back(
        {{"window", w}, {"shard_load", {1, 1, 1}}, {"balancedness", w == 199 ? 1.0 : 0.0}});
  const auto lines = render_top(s, step_means{}, frame_size{80, 40});
  const std::string line = line_of(lines, "BALANCEDNESS");
  CHECK(has(line, "▁▁█  1.000 last of 200 windows"));
  CHECK(display_width(line) <= 80);
}

TEST_CASE("events show kind and epoch and a summary with the newest last") {
  const auto lines = render_top(snapshot(), step_means{}, frame_size{100, 40});
  const std::string text = joined(lines);
  const size_t started = text.find("migration_started");
  const size_t finished = text.find("migration_finished");
  REQUIRE(started != std::string::npos);
  REQUIRE(finished != std::string::npos);
  CHECK(started < finished);
  CHECK(has(text, "epoch 3  moved 4  predicted 0.900  seed 5"));
  CHECK_FALSE(has(text, "measured"));
}

TEST_CASE("window measurements stay out of the event list since the sparkline shows them") {
  top_snapshot s = snapshot();
  s.events = {event(1, "balance_measured", 2)};
  const std::string only = joined(render_top(s, step_means{}, frame_size{100, 40}));
  CHECK(has(only, "no re-plan or migration yet"));
  s.events.push_back(event(2, "plan_adopted", 3));
  const std::string both = joined(render_top(s, step_means{}, frame_size{100, 40}));
  CHECK(has(both, "plan_adopted"));
  CHECK_FALSE(has(both, "balance_measured"));
}

TEST_CASE("no line is wider than the terminal and the frame fits its rows") {
  top_snapshot s = snapshot();
  for (int i = 3; i < 40; ++i)
    s.events.push_back(event(i, "plan_rejected", i));
  s.events.back()["detail"] = std::string(300, 'x');
  for (int i = 2; i < 30; ++i)
    s.status.push_back(role("expert_shard-" + std::to_string(i), "expert_shard", 0, 0, 1, 1));
  for (const frame_size size : {frame_size{80, 24}, frame_size{40, 12}, frame_size{200, 60}}) {
    const auto lines = render_top(s, step_means{}, size);
    CHECK(lines.size() <= static_cast<size_t>(size.rows));
    for (const auto& l : lines)
      CHECK(display_width(l) <= static_cast<size_t>(size.columns));
  }
  const auto small = render_top(s, step_means{}, frame_size{80, 24});
  const std::string text = joined(small);
  CHECK(has(text, "more"));                     // Roles were clipped.
  CHECK(has(text, "epoch 39"));                 // The newest event stays.
  CHECK_FALSE(has(text, "migration_started"));  // The oldest gave way.
  CHECK_FALSE(line_of(small, "BALANCEDNESS").empty());
}

TEST_CASE("an error is shown with the retry interval above the last data polled") {
  top_snapshot s = snapshot();
  s.error = brigade::cli::describe_unreachable("http://127.0.0.1:9", "connection refused");
  s.events_error = "the server ended the event stream";
  const auto lines = render_top(s, step_means{}, frame_size{80, 30});
  // The error is wrapped at spaces: undo that to look for phrases.
  std::string text = joined(lines);
  std::replace(text.begin(), text.end(), '\n', ' ');
  CHECK(lines.at(1).rfind("! no answer from http://127.0.0.1:9", 0) == 0);
  CHECK(has(text, "brigade serve running there"));
  CHECK(has(text, "retrying every 1000 ms"));
  CHECK_FALSE(has(text, "! events"));  // The server's error covers it.
  CHECK_FALSE(line_of(lines, "prefill-0").empty());
}

TEST_CASE("a frame before any answer and one without expert shards say so") {
  top_snapshot s;
  s.url = "http://127.0.0.1:8000";
  s.frame = 1;
  const std::string empty = joined(render_top(s, step_means{}, frame_size{}));
  CHECK(has(empty, "no status yet"));
  CHECK(has(empty, "SHARD LOAD  -"));
  CHECK(has(empty, "no re-plan or migration yet"));
  s.status = status_json();
  s.experts = nullptr;
  CHECK(has(joined(render_top(s, step_means{}, frame_size{})), "this server has no expert shards"));
  s.experts = json::object({{"windows", json::array()}, {"sample_interval_steps", 4}});
  const std::string waiting = joined(render_top(s, step_means{}, frame_size{}));
  CHECK(has(waiting, "no sample window closed yet (one closes every 4 steps)"));
}

TEST_CASE("a 401 says to pass --api-key and a refused key says to check it") {
  using brigade::cli::describe_http_failure;
  CHECK(has(describe_http_failure("/v1/status", 401, "", false), "--api-key KEY"));
  CHECK(has(describe_http_failure("/v1/status", 401, "", true), "refused the key"));
  const std::string body = R"({"error": {"message": "no such route"}})";
  CHECK(has(describe_http_failure("/v1/experts", 404, body, false), "no such route"));
  CHECK(has(describe_http_failure("/v1/experts", 500, body, false), "HTTP 500: no such route"));
}

TEST_CASE("urls give a host and a port and https or a path is refused") {
  using brigade::cli::parse_url;
  const auto plain = parse_url("http://127.0.0.1:8123/");
  REQUIRE(plain.ok());
  CHECK(plain->host == "127.0.0.1");
  CHECK(plain->port == 8123);
  CHECK(plain->url == "http://127.0.0.1:8123");
  const auto named = parse_url("localhost:9000");
  REQUIRE(named.ok());
  CHECK((named->host == "127.0.0.1" || named->host == "::1"));
  const auto v6 = parse_url("http://[::1]:7000");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(parse_url("http://10.0.0.1")->port == 80);
  CHECK_FALSE(parse_url("https://127.0.0.1:8000").ok());
  CHECK_FALSE(parse_url("http://127.0.0.1:8000/v1").ok());
  CHECK_FALSE(parse_url("http://127.0.0.1:99999").ok());
  CHECK_FALSE(parse_url("http://:8000").ok());
}
