// `brigade bench tokenizer`: encode and decode throughput of the tokenizer on one core, with a
// cold word cache (first pass) and a warm one (second pass) side by side.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "model/tokenizer.hpp"
#include "model/tokenizer_builder.hpp"
#include "model/tokenizer_corpus.hpp"

namespace brigade::bench {
namespace {

using clock_type = std::chrono::steady_clock;

struct row {
  std::string name;
  std::string text;
  double mb = 0;
  double cold_mb_per_s = 0;
  double warm_mb_per_s = 0;
  double decode_mb_per_s = 0;
  double bytes_per_token = 0;
};

// Words of the embedded corpus in a seeded random order, with numbers, line breaks and (for
// "mixed") CJK and emoji mixed in, so that the cache sees realistic repetition.
std::string make_text(std::size_t bytes, bool mixed, uint64_t seed) {
  std::vector<std::string> words;
  const std::string_view corpus = model::tokenizer_corpus();
  std::size_t start = 0;
  for (std::size_t i = 0; i <= corpus.size(); ++i) {
    if (i == corpus.size() || corpus[i] == ' ' || corpus[i] == '\n') {
      if (i > start) words.emplace_back(corpus.substr(start, i - start));
      start = i + 1;
    }
  }
  const char* extras[] = {"\xE4\xB8\xAD\xE6\x96\x87", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
                          "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xD0\xBF\xD1\x80\xD0\xB8"};
  std::mt19937_64 rng(seed);
  std::string text;
  while (text.size() < bytes) {
    const uint64_t r = rng() % 100;
    if (mixed && r < 10) {
      text += extras[rng() % 4];
    } else if (r < 14) {
      text += std::to_string(rng() % 100000);
    } else {
      text += words[rng() % words.size()];
    }
    text += rng() % 12 == 0 ? "\n" : " ";
  }
  return text;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

result<row> measure(const std::string& name, const std::string& dir, const std::string& label,
                    const std::string& text) {
  auto tok = model::tokenizer::load(dir);  // Fresh, so the first pass starts with no cache.
  if (!tok) return tok.err();
  row r{name, label, static_cast<double>(text.size()) / 1e6};
  auto t0 = clock_type::now();
  const auto ids = tok->encode(text);
  r.cold_mb_per_s = r.mb / seconds_since(t0);
  t0 = clock_type::now();
  const auto again = tok->encode(text);
  r.warm_mb_per_s = r.mb / seconds_since(t0);
  t0 = clock_type::now();
  const std::string decoded = tok->decode(again);
  r.decode_mb_per_s = r.mb / seconds_since(t0);
  r.bytes_per_token = static_cast<double>(text.size()) / static_cast<double>(ids.size());
  if (ids != again || decoded.size() < text.size() / 2) {
    return error{errc::internal, "tokenizer bench: repeated encodes disagree on " + name};
  }
  return r;
}

void print(const std::vector<row>& rows, bool json) {
  if (json) {
    std::printf("{\"benchmark\":\"tokenizer\",\"rows\":[");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      std::printf(
          "%s{\"tokenizer\":\"%s\",\"text\":\"%s\",\"mb\":%.3f,\"encode_cold_mb_per_s\":"
          "%.3f,\"encode_warm_mb_per_s\":%.3f,\"decode_mb_per_s\":%.3f,"
          "\"bytes_per_token\":%.3f,\"warm_over_cold\":%.3f}",
          i ? "," : "", r.name.c_str(), r.text.c_str(), r.mb, r.cold_mb_per_s, r.warm_mb_per_s,
          r.decode_mb_per_s, r.bytes_per_token, r.warm_mb_per_s / r.cold_mb_per_s);
    }
    std::printf("]}\n");
    return;
  }
  std::printf("%-22s %-7s %6s %12s %12s %12s %9s %10s\n", "tokenizer", "text", "MB", "encode cold",
              "encode warm", "decode", "warm/cold", "bytes/tok");
  std::printf("%-22s %-7s %6s %12s %12s %12s %9s %10s\n", "", "", "", "MB/s", "MB/s", "MB/s", "",
              "");
  for (const row& r : rows) {
    std::printf("%-22s %-7s %6.2f %12.2f %12.2f %12.2f %9.2f %10.2f\n", r.name.c_str(),
                r.text.c_str(), r.mb, r.cold_mb_per_s, r.warm_mb_per_s, r.decode_mb_per_s,
                r.warm_mb_per_s / r.cold_mb_per_s, r.bytes_per_token);
  }
}

}  // namespace

int tokenizer(int argc, char** argv) {
  CLI::App app{"Tokenizer encode/decode throughput on one core"};
  app.option_defaults()->always_capture_default();
  bool json = false;
  std::string extra_dir;
  double megabytes = 2.0;
  app.add_flag("--json", json, "Print one JSON object instead of a table");
  app.add_option("--tokenizer", extra_dir, "Also measure DIR/tokenizer.json (e.g. Qwen3's)");
  app.add_option("--mb", megabytes, "Megabytes of text per measurement")
      ->check(CLI::Range(0.01, 256.0));
  CLI11_PARSE(app, argc, argv);

  const std::string generated =
      (std::filesystem::temp_directory_path() / "brigade-bench-tokenizer").string();
  model::tokenizer_spec spec;
  if (auto s = model::write_byte_level_tokenizer(generated, spec); !s) {
    std::fprintf(stderr, "bench tokenizer: %s\n", s.err().describe().c_str());
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> tokenizers = {
      {"generated (1024 ids)", generated}};
  if (!extra_dir.empty()) tokenizers.emplace_back(extra_dir, extra_dir);
  const auto bytes = static_cast<std::size_t>(megabytes * 1e6);
  const std::string english = make_text(bytes, /*mixed=*/false, 1);
  const std::string mixed = make_text(bytes, /*mixed=*/true, 2);
  std::vector<row> rows;
  for (const auto& [name, dir] : tokenizers) {
    for (const auto& [label, text] : {std::pair{"english", &english}, std::pair{"mixed", &mixed}}) {
      auto r = measure(name, dir, label, *text);
      if (!r) {
        std::fprintf(stderr, "bench tokenizer: %s\n", r.err().describe().c_str());
        return 1;
      }
      rows.push_back(*r);
    }
  }
  print(rows, json);
  return 0;
}

}  // namespace brigade::bench
