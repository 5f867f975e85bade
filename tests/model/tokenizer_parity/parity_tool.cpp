// The C++ half of the tokenizer parity test, run by run_parity.sh (parity.js checks the ids and
// the decoded text through `brigade tokenize` and `brigade detokenize`):
//   parity_tool write DIR MODEL_TYPE VOCAB_SIZE   writes a generated tokenizer to DIR
//   parity_tool stream DIR CASES.json             checks streaming decode on parity.js' cases
// A stream check fails where incremental_decoder, fed the reference's ids one at a time (with
// and without special tokens), gives other text than decode; it prints the first such cases
// with the seed.
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

std::string streamed(const tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  brigade::model::incremental_decoder dec(tok, skip_special);
  std::string out;
  for (int32_t id : ids)
    out += dec.push(id);
  return out + dec.finish();
}

struct tally {
  int mismatches = 0;
  int reported = 0;
};

void report(tally& t, std::size_t index, int64_t seed, const nlohmann::json& c,
            const std::string& detail) {
  ++t.mismatches;
  if (t.reported++ >= kMaxReported) return;
  std::printf("MISMATCH (stream) in case %zu of seed %lld: text %s\n%s\n", index,
              static_cast<long long>(seed), c["text"].dump().c_str(), detail.c_str());
}

int stream(const std::string& dir, const std::string& cases_path) {
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
    const auto ids = cases[i]["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      const std::string decoded = tok->decode(ids, skip);
      const std::string pieces = streamed(*tok, ids, skip);
      if (pieces == decoded) continue;
      report(t, i, seed, cases[i],
             "  ids:      " + show_ids(ids) + (skip ? " (special tokens skipped)" : "") +
                 "\n  decoded:  " + nlohmann::json(decoded).dump() +
                 "\n  streamed: " + nlohmann::json(pieces).dump());
    }
  }
  std::printf("%s: %zu cases (seed %lld): %d streaming mismatches\n", dir.c_str(), cases.size(),
              static_cast<long long>(seed), t.mismatches);
  return t.mismatches == 0 && !cases.empty() ? 0 : 1;
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
  if (args.size() == 3 && args[0] == "stream") return stream(args[1], args[2]);
  std::fprintf(stderr,
               "usage: parity_tool write DIR MODEL_TYPE VOCAB_SIZE\n"
               "       parity_tool stream DIR CASES.json\n");
  return 2;
}
