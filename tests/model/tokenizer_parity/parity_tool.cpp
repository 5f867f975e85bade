// The C++ half of the tokenizer parity test, run by run_parity.sh:
//   parity_tool write DIR MODEL_TYPE VOCAB_SIZE   writes a generated tokenizer to DIR
//   parity_tool check DIR CASES.json              compares brigade with gen_cases.js' ids
// A check fails on any id mismatch, on decode(encode(s)) differing from s normalized, and on
// streaming decode differing from decode; it prints the first cases that differ with the seed.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/tokenizer.hpp"
#include "model/tokenizer_builder.hpp"

namespace {

using brigade::model::tokenizer;

constexpr int kMaxReported = 8;

std::string show_ids(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i)
    out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

std::string streamed(const tokenizer& tok, const std::vector<int32_t>& ids) {
  brigade::model::incremental_decoder dec(tok, /*skip_special=*/false);
  std::string out;
  for (int32_t id : ids)
    out += dec.push(id);
  return out + dec.finish();
}

struct tally {
  int id_mismatches = 0;
  int decode_mismatches = 0;
  int stream_mismatches = 0;
  int reported = 0;
};

void report(tally& t, std::size_t index, int64_t seed, const std::string& what,
            const nlohmann::json& c, const std::string& detail) {
  if (t.reported++ >= kMaxReported) return;
  std::printf("MISMATCH (%s) in case %zu of seed %lld: text %s\n%s\n", what.c_str(), index,
              static_cast<long long>(seed), c["text"].dump().c_str(), detail.c_str());
}

int check(const std::string& dir, const std::string& cases_path) {
  auto tok = tokenizer::load(dir);
  if (!tok) {
    std::printf("cannot load %s: %s\n", dir.c_str(), tok.err().describe().c_str());
    return 1;
  }
  std::ifstream in(cases_path);
  std::stringstream text;
  text << in.rdbuf();
  const auto doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("cases")) {
    std::printf("cannot read cases from %s\n", cases_path.c_str());
    return 1;
  }
  const int64_t seed = doc.value("seed", int64_t{-1});
  const auto& cases = doc["cases"];
  tally t;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto input = c["text"].get<std::string>();
    const auto expected = c["ids"].get<std::vector<int32_t>>();
    const auto ids = tok->encode(input);
    if (ids != expected) {
      ++t.id_mismatches;
      report(t, i, seed, "ids", c,
             "  js:      " + show_ids(expected) + "\n  brigade: " + show_ids(ids));
    }
    const std::string decoded = tok->decode(ids);
    if (decoded != c["decoded"].get<std::string>()) {
      ++t.decode_mismatches;
      report(t, i, seed, "decode", c, "  decoded: " + nlohmann::json(decoded).dump());
    }
    if (streamed(*tok, ids) != decoded) {
      ++t.stream_mismatches;
      report(t, i, seed, "stream", c, "  streamed: " + nlohmann::json(streamed(*tok, ids)).dump());
    }
  }
  std::printf(
      "%s: %zu cases (seed %lld): %d id mismatches, %d decode mismatches, %d streaming "
      "mismatches\n",
      dir.c_str(), cases.size(), static_cast<long long>(seed), t.id_mismatches, t.decode_mismatches,
      t.stream_mismatches);
  const bool ok = t.id_mismatches == 0 && t.decode_mismatches == 0 && t.stream_mismatches == 0;
  return ok && !cases.empty() ? 0 : 1;
}

int write(const std::string& dir, const std::string& model_type, const std::string& vocab) {
  brigade::model::tokenizer_spec spec;
  spec.model_type = model_type;
  spec.vocab_size = std::stoi(vocab);
  const auto s = brigade::model::write_byte_level_tokenizer(dir, spec);
  if (!s) {
    std::printf("cannot write %s: %s\n", dir.c_str(), s.err().describe().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 4 && args[0] == "write") return write(args[1], args[2], args[3]);
  if (args.size() == 3 && args[0] == "check") return check(args[1], args[2]);
  std::fprintf(stderr,
               "usage: parity_tool write DIR MODEL_TYPE VOCAB_SIZE\n"
               "       parity_tool check DIR CASES.json\n");
  return 2;
}
