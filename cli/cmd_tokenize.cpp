// `brigade tokenize` and `brigade detokenize`: a model directory's tokenizer from the command
// line, for one text or a JSON-lines batch in one process, so that anyone can check brigade's
// ids against another tokenizer. Only tokenizer.json (and tokenizer_config.json, if present)
// are read: no config.json or weights.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"

namespace brigade::cli {
namespace {

using json = nlohmann::json;

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "brigade %s: %s\n", command, message.c_str());
  return 1;
}

// Tokens are written as the vocabulary has them, which is always valid UTF-8; text given back
// by decode is too. Replacing instead of throwing keeps a stray byte from ending a batch.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void print_line(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

json tokens_of(const model::tokenizer& tok, const std::vector<int32_t>& ids) {
  json tokens = json::array();
  for (int32_t id : ids) {
    auto text = tok.token_text(id);
    tokens.push_back(text ? json(*text) : json(nullptr));
  }
  return tokens;
}

void print_table(const model::tokenizer& tok, const std::vector<int32_t>& ids) {
  std::printf("%6s %8s  %s\n", "#", "id", "token");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto text = tok.token_text(ids[i]);
    const std::string shown = text ? dump(json(*text)) : "(none)";
    std::printf("%6zu %8d  %s%s\n", i, ids[i], shown.c_str(),
                tok.is_special(ids[i]) ? "  special" : "");
  }
  std::printf("%zu tokens\n", ids.size());
}

// Calls `each` with every line of `path` parsed as JSON; the first error names the line.
template <class Fn>
status for_each_json_line(const std::string& path, Fn each) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error{errc::not_found, path + " cannot be opened; check that the file exists"};
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    json value = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (auto s = each(value); !s) {
      return error{s.err().code, path + ":" + std::to_string(number) + ": " + s.err().message};
    }
  }
  if (in.bad()) return error{errc::io_error, path + " could not be read"};
  return ok_status();
}

result<int32_t> parse_id(const json& v) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
    return error{errc::invalid_argument, v.dump() + " is not a token id"};
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

result<std::vector<int32_t>> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const json v = json::parse(item, nullptr, /*allow_exceptions=*/false);
    auto id = parse_id(v);
    if (!id) return error{errc::invalid_argument, "--ids: '" + item + "' is not a token id"};
    ids.push_back(*id);
  }
  return ids;
}

// The --chat hook: the conversation rendered in the model's chat format (chat_template.hpp
// chooses it from the chat template, config.json's model_type, or --chat-format), then encoded
// without added special tokens, since the template writes them.
int tokenize_chat(const model::tokenizer& tok, const std::string& dir, const std::string& path,
                  bool add_generation_prompt, const std::string& format_name) {
  std::optional<model::chat_format> named;
  if (!format_name.empty()) {
    named = model::parse_chat_format(format_name);
    if (!named) {
      return fail("tokenize", "--chat-format '" + format_name + "' is not one of " +
                                  model::chat_format_names());
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("tokenize", path + " cannot be opened; check that the file exists");
  std::stringstream text;
  text << in.rdbuf();
  auto rendered = model::render_chat_json(dir, text.str(), add_generation_prompt, named);
  if (!rendered) return fail("tokenize", path + ": " + rendered.err().message);
  print_line(dump({{"text", *rendered}, {"ids", tok.encode(*rendered)}}));
  return 0;
}

}  // namespace

int tokenize(int argc, char** argv) {
  std::string dir, text, jsonl, chat, chat_format;
  bool json_out = false, add_special_tokens = false, generation_prompt = false;
  CLI::App app{"Print the token ids and tokens of text with a model's tokenizer",
               "brigade tokenize"};
  app.add_option("--model", dir, "directory with tokenizer.json (and tokenizer_config.json)")
      ->required();
  auto* text_opt = app.add_option("--text", text, "the text to encode");
  auto* jsonl_opt =
      app.add_option("--jsonl", jsonl,
                     "a file of JSON strings, one per line; prints one {\"ids\", \"tokens\"} "
                     "JSON object per line");
  auto* chat_opt = app.add_option("--chat", chat,
                                  "an OpenAI messages list (JSON file) to render with the model's "
                                  "chat format; prints {\"text\", \"ids\"}");
  text_opt->excludes(jsonl_opt)->excludes(chat_opt);
  jsonl_opt->excludes(chat_opt);
  app.add_flag("--add-generation-prompt", generation_prompt,
               "with --chat: open the assistant's turn at the end");
  app.add_option("--chat-format", chat_format,
                 "with --chat: the chat format to use instead of the model's");
  app.add_flag("--add-special-tokens", add_special_tokens,
               "put the post-processor's special tokens around the ids (e.g. Mistral's <s>)");
  app.add_flag("--json", json_out, "print {\"ids\": [...], \"tokens\": [...]}");
  CLI11_PARSE(app, argc, argv);
  if (text_opt->count() + jsonl_opt->count() + chat_opt->count() == 0) {
    return fail("tokenize", "give --text, --jsonl or --chat");
  }
  auto tok = model::tokenizer::load(dir);
  if (!tok) return fail("tokenize", tok.err().message);
  if (!chat.empty()) return tokenize_chat(*tok, dir, chat, generation_prompt, chat_format);
  const auto encode = [&](const std::string& input) {
    const std::vector<int32_t> ids = tok->encode(input, add_special_tokens);
    return json{{"ids", ids}, {"tokens", tokens_of(*tok, ids)}};
  };
  if (jsonl.empty()) {
    if (json_out) {
      print_line(dump(encode(text)));
    } else {
      print_table(*tok, tok->encode(text, add_special_tokens));
    }
    return 0;
  }
  const status s = for_each_json_line(jsonl, [&](const json& line) -> status {
    if (!line.is_string()) return error{errc::invalid_argument, "expected a JSON string"};
    print_line(dump(encode(line.get<std::string>())));
    return ok_status();
  });
  return s ? 0 : fail("tokenize", s.err().message);
}

int detokenize(int argc, char** argv) {
  std::string dir, ids_text, jsonl;
  bool json_out = false, skip_special = false;
  CLI::App app{"Print the text of token ids with a model's tokenizer", "brigade detokenize"};
  app.add_option("--model", dir, "directory with tokenizer.json (and tokenizer_config.json)")
      ->required();
  auto* ids_opt = app.add_option("--ids", ids_text, "comma-separated token ids");
  auto* jsonl_opt =
      app.add_option("--jsonl", jsonl,
                     "a file of JSON arrays of ids, one per line; prints one JSON string per "
                     "line");
  ids_opt->excludes(jsonl_opt);
  app.add_flag("--skip-special-tokens", skip_special, "leave special tokens out of the text");
  app.add_flag("--json", json_out, "with --ids: print the text as a JSON string");
  CLI11_PARSE(app, argc, argv);
  if (ids_opt->count() + jsonl_opt->count() == 0)
    return fail("detokenize", "give --ids or --jsonl");
  auto tok = model::tokenizer::load(dir);
  if (!tok) return fail("detokenize", tok.err().message);
  if (jsonl.empty()) {
    auto ids = parse_id_list(ids_text);
    if (!ids) return fail("detokenize", ids.err().message);
    const std::string text = tok->decode(*ids, skip_special);
    print_line(json_out ? dump(json(text)) : text);
    return 0;
  }
  const status s = for_each_json_line(jsonl, [&](const json& line) -> status {
    if (!line.is_array()) return error{errc::invalid_argument, "expected a JSON array of ids"};
    std::vector<int32_t> ids;
    for (const json& v : line) {
      auto id = parse_id(v);
      if (!id) return id.err();
      ids.push_back(*id);
    }
    print_line(dump(json(tok->decode(ids, skip_special))));
    return ok_status();
  });
  return s ? 0 : fail("detokenize", s.err().message);
}

}  // namespace brigade::cli
