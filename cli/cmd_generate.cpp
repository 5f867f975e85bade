// `brigade generate`: offline generation with the single-process engine.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "common/npy.hpp"
#include "common/progress.hpp"
#include "gpu/backend.hpp"
#include "gpu/device_choice.hpp"
#include "model/draft_model.hpp"
#include "model/engine.hpp"
#include "model/kv_layout.hpp"
#include "model/loaded_model.hpp"
#include "model/speculation_json.hpp"
#include "model/tokenizer.hpp"

namespace brigade::cli {
namespace {

result<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return error(errc::invalid_argument, "--prompt-ids: '" + item + "' is not a token id");
    }
  }
  if (ids.empty()) return error(errc::invalid_argument, "--prompt-ids is empty");
  return ids;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "brigade generate: %s\n", message.c_str());
  return 1;
}

}  // namespace

int generate(int argc, char** argv) {
  std::string model_dir, prompt, prompt_ids, logits_out;
  model::request_options request;
  bool json_out = false, ignore_eos = false;
  CLI::App app{"Generate offline with the single-process engine", "brigade generate"};
  app.option_defaults()->always_capture_default();
  app.add_option("--model", model_dir, "checkpoint directory")->required();
  auto* text_opt = app.add_option("--prompt", prompt, "prompt text");
  auto* ids_opt = app.add_option("--prompt-ids", prompt_ids, "prompt as comma-separated token ids");
  text_opt->excludes(ids_opt);
  app.add_option("--max-tokens", request.max_tokens, "tokens to generate")->capture_default_str();
  int speculate = 0;
  auto* speculate_opt =
      app.add_option("--speculate", speculate,
                     "draft up to N tokens per step and verify them (same output); by prompt "
                     "lookup unless --draft-model is given")
          ->check(CLI::Range(0, 64))
          ->capture_default_str();
  std::string draft_dir;
  app.add_option("--draft-model", draft_dir,
                 "draft with this small dense model of the same tokenizer (up to 5 tokens per "
                 "step unless --speculate says otherwise)");
  int draft_window = -1;
  app.add_option("--draft-attention-window", draft_window,
                 "with --draft-model: positions the draft attends to, the most recent (0: all)")
      ->check(CLI::Range(0, 1 << 24))
      ->default_str("the draft directory's draft_settings.json, else 0");
  bool no_gate = false;
  app.add_flag("--no-speculation-gate", no_gate,
               "draft in every step, even where drafting measured slower per token than plain "
               "decoding");
  std::string head_choice;
  app.add_option("--confidence-head", head_choice,
                 "with --draft-model: verify only the drafts this head trusts (PATH, or none; "
                 "default: the draft directory's confidence_head.json when present)");
  app.add_option("--temperature", request.sampling.temperature, "0 is greedy")
      ->capture_default_str();
  app.add_option("--top-k", request.sampling.top_k, "keep the k most likely tokens (0: all)");
  app.add_option("--top-p", request.sampling.top_p, "nucleus sampling mass");
  app.add_option("--seed", request.sampling.seed, "sampling seed");
  app.add_option("--presence-penalty", request.sampling.presence_penalty,
                 "subtracted from the logit of every token generated so far (-2 to 2)");
  app.add_option("--frequency-penalty", request.sampling.frequency_penalty,
                 "subtracted per time a token was generated so far (-2 to 2)");
  app.add_option("--repetition-penalty", request.sampling.repetition_penalty,
                 "shrinks the logits of tokens in the prompt or output (1: off)");
  std::vector<std::string> biases;
  app.add_option("--logit-bias", biases, "TOKEN=BIAS added to a token's logit (repeatable)");
  app.add_option("--min-tokens", request.sampling.min_tokens,
                 "no end-of-sequence token before this many tokens");
  app.add_option("--top-logprobs", request.top_logprobs,
                 "print each token's log-probability and the N likeliest (0-20) with --json")
      ->check(CLI::Range(0, 20));
  app.add_option("--logits-out", logits_out,
                 "write a float32 .npy [N, vocab]: row i holds the logits token i came from");
  std::string device_text = "cpu";
  app.add_option("--device", device_text, "where the model runs: cpu or cuda:N")
      ->capture_default_str();
  std::string kv_dtype_text = "f32";
  app.add_option("--kv-dtype", kv_dtype_text,
                 "the KV cache's element type: f32 (exact) or bf16 (half the KV memory)")
      ->capture_default_str();
  app.add_flag("--json", json_out, "print {\"ids\": [...], \"text\": \"...\"}");
  app.add_flag("--ignore-eos", ignore_eos, "keep generating past end-of-sequence tokens");
  CLI11_PARSE(app, argc, argv);
  if (prompt.empty() && prompt_ids.empty()) return fail("give --prompt or --prompt-ids");
  for (const std::string& b : biases) {
    const size_t eq = b.find('=');
    char* end = nullptr;
    const long token = eq == std::string::npos ? -1 : std::strtol(b.c_str(), &end, 10);
    if (eq == std::string::npos || end != b.c_str() + eq || token < 0) {
      return fail("--logit-bias takes TOKEN=BIAS, e.g. 42=-100; got '" + b + "'");
    }
    request.sampling.logit_bias.push_back(
        {static_cast<int32_t>(token), std::strtof(b.c_str() + eq + 1, nullptr)});
  }

  auto tok = model::tokenizer::load(model_dir);
  if (!tok && prompt_ids.empty()) return fail(tok.err().message);
  std::vector<int32_t> ids;
  if (!prompt_ids.empty()) {
    auto parsed = parse_ids(prompt_ids);
    if (!parsed) return fail(parsed.err().message);
    ids = parsed.value();
  } else {
    ids = tok->encode(prompt);
  }

  auto device = gpu::parse_device(device_text, "--device");
  if (!device) return fail(device.err().message);
  auto kv_dtype = model::parse_kv_dtype(kv_dtype_text, "--kv-dtype");
  if (!kv_dtype) return fail(kv_dtype.err().message);
  auto made = gpu::open_backend(device.value(), "--device");
  if (!made) return fail(made.err().message);
  std::unique_ptr<gpu::backend> dev = std::move(made.value());
  progress_bar bar("loading " + model_dir);
  auto loaded = model::loaded_model::load(
      model_dir, *dev, true, [&](size_t done, size_t total) { bar.update(done, total); });
  if (!loaded) return fail(loaded.err().message);
  bar.finish();
  const model::model_config& config = loaded.value()->config;
  if (!ignore_eos) {
    std::set<int32_t> stops(config.eos_token_ids.begin(), config.eos_token_ids.end());
    if (tok && tok->eos_id()) stops.insert(*tok->eos_id());
    request.stop_ids.assign(stops.begin(), stops.end());
  }
  request.keep_logits = !logits_out.empty();
  model::engine_options options;
  options.kv_dtype = kv_dtype.value();
  options.speculation.max_draft = speculate;
  options.speculation.measured_gate = !no_gate;
  if (!draft_dir.empty()) {
    options.speculation.draft = model::draft_kind::model;
    options.speculation.draft_model = draft_dir;
    options.speculation.draft_attention_window = draft_window;
    if (speculate_opt->count() == 0) options.speculation.max_draft = model::default_model_drafts;
    auto draft = model::draft_model::load(draft_dir, config, model_dir, *dev);
    if (!draft) return fail(draft.err().message);
    options.draft_weights = draft.value();
    auto head = model::confidence_head::for_draft(draft_dir, head_choice);
    if (!head) return fail(head.err().message);
    options.confidence_head = head.value();
  }
  options.kv_tokens =
      std::min(config.max_positions, static_cast<int>(ids.size()) + request.max_tokens + 16);
  model::engine eng(*loaded.value(), *dev, options);
  auto id = eng.submit(ids, request);
  if (!id) return fail(id.err().message);
  std::vector<model::token_event> events;
  while (eng.step(events)) {
  }
  nlohmann::json logprobs = nlohmann::json::array();
  for (const model::token_event& e : events) {
    nlohmann::json top = nlohmann::json::array();
    for (const model::token_logprob& t : e.logprobs.top)
      top.push_back({t.token, t.logprob});
    logprobs.push_back({{"token", e.token}, {"logprob", e.logprobs.chosen.logprob}, {"top", top}});
  }
  const std::vector<int32_t>& out = eng.output(id.value());
  const std::string text = tok ? tok->decode(out, true) : std::string();

  if (!logits_out.empty()) {
    status w = write_npy_f32(logits_out, {out.size(), static_cast<size_t>(config.vocab_size)},
                             eng.kept_logits(id.value()).data());
    if (!w) return fail(w.err().message);
  }
  if (json_out) {
    nlohmann::json j;
    j["ids"] = out;
    j["text"] = text;
    j["finish_reason"] = model::to_string(eng.finished(id.value()));
    if (request.top_logprobs >= 0) j["logprobs"] = logprobs;
    j["speculation"] = model::speculation_json(
        eng.speculation(), options.speculation.max_draft, options.speculation.draft,
        options.draft_weights ? model::draft_model::weight_format_of(*options.draft_weights) : "",
        options.draft_weights
            ? model::draft_model::attention_window_for(options.speculation, *options.draft_weights)
            : 0);
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s\n", text.c_str());
  }
  return 0;
}

}  // namespace brigade::cli
