// Fuzz target: any HTTP request to the API. The first byte picks a POST route (its body is the
// rest) or a GET (the rest is the target). A fault here would be an answer of 500 (an exception
// while answering), or an ASan/UBSan report; a generation that starts is run through its stream.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "model/model_writer.hpp"
#include "model/tokenizer.hpp"
#include "serve/api_handler.hpp"

using namespace brigade;
using namespace brigade::serve;

namespace {

constexpr int vocab = 512;

// The API's view of a model; generation itself is not under test here.
class idle_service final : public inference_service {
 public:
  status submit(generation_request, std::shared_ptr<generation_sink>) override {
    return ok_status();
  }
  void cancel(int64_t) override {}
  service_info info() const override {
    service_info i;
    i.model_name = "tiny";
    i.model_type = "qwen3_moe";
    i.context_tokens = 256;
    i.vocab_size = vocab;
    return i;
  }
  bool ready() const override { return true; }
  std::string actors_json() const override { return "{}"; }
  void collect_metrics(metrics::registry&) const override {}
};

// A generated model's tokenizer, written once to a temporary folder.
model::tokenizer make_tokenizer() {
  const auto dir =
      std::filesystem::temp_directory_path() / ("brigade-fuzz-model-" + std::to_string(::getpid()));
  model::model_spec spec;
  spec.layers = 1;
  spec.hidden = 32;
  spec.heads = 2;
  spec.kv_heads = 1;
  spec.head_dim = 16;
  spec.experts = 2;
  spec.top_k = 1;
  spec.moe_inter = 16;
  spec.dense_inter = 32;
  spec.vocab = vocab;
  spec.max_positions = 256;
  const status written = model::write_random_model(spec, dir.string());
  auto tok =
      written ? model::tokenizer::load(dir.string()) : result<model::tokenizer>(written.err());
  std::filesystem::remove_all(dir);
  if (!tok) {
    std::fprintf(stderr, "cannot make the fuzz model: %s\n", tok.err().message.c_str());
    std::abort();
  }
  return std::move(tok.value());
}

// No keys, on loopback: every route, the admin ones too, is open to the fuzzer.
api_handler_options handler_options() {
  api_handler_options o;
  o.eos_ids = {0};
  return o;
}

struct api {
  idle_service service;
  model::tokenizer tok = make_tokenizer();
  api_handler handler{service, tok, handler_options()};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static api a;
  if (size == 0) return 0;
  static const char* const posts[] = {"/v1/completions", "/v1/chat/completions", "/v1/admin/kill",
                                      "/v1/admin/replan"};
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  http_request_view req;
  if (data[0] < 200) {
    req.method = "POST";
    req.target = posts[data[0] % 4];
    req.body = rest;
  } else {
    req.method = "GET";
    req.target = rest;
  }
  auto outcome = a.handler.handle(req, api_handler::clock::now());
  if (auto* reply = std::get_if<http_reply>(&outcome); reply && reply->status >= 500) {
    std::fprintf(stderr, "answered %d: %s\n", reply->status, reply->body.c_str());
    std::abort();
  }
  if (auto* start = std::get_if<generation_start>(&outcome)) {
    // Tokens from the input's bytes, through detokenizing and stop-string matching.
    generation_stream& stream = *start->stream;
    stream.open();
    std::vector<int32_t> tokens;
    for (size_t i = 1; i + 1 < size && tokens.size() < 64; i += 2)
      tokens.push_back((data[i] * 256 + data[i + 1]) % vocab);
    generation_usage usage;
    usage.completion_tokens = static_cast<int>(tokens.size());
    for (int choice = 0; choice < stream.choices(); ++choice) {
      stream.on_tokens(choice, tokens);
      stream.on_finished(choice, finish_reason::max_tokens, usage);
    }
  }
  return 0;
}
