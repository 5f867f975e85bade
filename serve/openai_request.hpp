// Parsing and validating OpenAI request bodies (/v1/completions, /v1/chat/completions) into a
// generation_request. Every rejection is a 400 whose error names the field at fault.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"
#include "serve/api_error.hpp"
#include "serve/inference_service.hpp"

namespace brigade::serve {

enum class api_kind { completion, chat };

/// A validated request: what to generate and how to answer.
struct parsed_request {
  api_kind kind = api_kind::completion;
  generation_request generation;  ///< Everything but the id, which the server assigns.
  /// Every prompt, in order: one, or a completion's list (a batch); generation.prompt is the
  /// first. Each prompt gets best_of generations, answered as choices prompt * n + i.
  std::vector<std::vector<int32_t>> prompts;
  std::string model;
  bool stream = false;
  bool include_usage = false;             ///< stream_options.include_usage.
  std::vector<std::string> stop_strings;  ///< Text that ends generation (not included).
  int n = 1;                              ///< Choices in the answer.
  int best_of = 1;  ///< Choices generated (>= n); the answer holds the n likeliest.
  /// Completions: each choice's text starts with the prompt's (and its logprobs, the prompt's).
  bool echo = false;
  /// max_tokens 0 (echo only): the prompt is scored, and the one token generated is dropped.
  bool no_output = false;
  /// The log-probabilities the answer shows (generation_request::top_logprobs as asked); the
  /// generation may compute the chosen token's even when -1, to rank best_of choices.
  int logprobs = -1;
  /// Chat with tools (tool_choice other than "none"): the answer's text is parsed for tool calls
  /// in the family's syntax (model/tool_calls.hpp).
  bool parse_tool_calls = false;
  model::chat_format format = model::chat_format::chatml;
  /// What tool_choice "required" or a named function put at the start of the assistant's turn:
  /// the opening of a call, which the model completes. The parser reads it first.
  std::string forced_prefix;
  /// The client's `cache_salt` (vLLM's field), "" when absent. The server combines it with the
  /// salt bound to the request's API key into generation.cache_salt (effective_cache_salt).
  std::string cache_salt;
};

/// The seed of choice `index` of a request seeded with `seed`: choice 0 keeps it, so n = 1
/// answers as before; the others get a splitmix64 mix of (seed, index). The same request gives
/// the same n answers.
uint64_t choice_seed(uint64_t seed, int index);

/// What validation needs to know about the served model.
struct request_context {
  service_info info;
  const model::tokenizer* tok = nullptr;
  model::chat_style chat;        ///< The model's chat format and its special tokens.
  std::vector<int32_t> eos_ids;  ///< Stop ids unless the request sets ignore_eos.
  uint64_t default_seed = 0;     ///< Seed when the request gives none.
};

/// Limits on what a request may ask for; each one is a bound on work or memory.
constexpr int max_stop_strings = 16;
constexpr size_t max_stop_string_bytes = 256;
constexpr int max_stop_token_ids = 64;
constexpr int max_messages = 4096;
constexpr int max_choices = 64;  ///< n and best_of: each choice is a generation.
constexpr int max_prompts = 64;  ///< Prompts in a completion's list.
/// Prompts times best_of: the generations one request starts.
constexpr int max_generations = 256;
constexpr int max_tools = 128;
constexpr int max_schema_depth = 32;  ///< Nesting of a tool's parameters schema.

/// Either the parsed request or the 400 to answer.
using parse_outcome = std::variant<parsed_request, api_error>;

parse_outcome parse_request(api_kind kind, std::string_view body, const request_context& ctx);

/// POST /tokenize (vLLM's): {"prompt": text or ids} or {"messages": [...]} (rendered with the
/// chat format; add_generation_prompt, default true) to token ids.
using ids_outcome = std::variant<std::vector<int32_t>, api_error>;
ids_outcome parse_tokenize(std::string_view body, const request_context& ctx);

/// POST /detokenize: {"tokens": [ids]} to the ids it holds, each in the vocabulary.
ids_outcome parse_detokenize(std::string_view body, const request_context& ctx);

}  // namespace brigade::serve
