#include "model/tokenizer_json.hpp"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace brigade::model::tokenizer_json {
namespace {

using json = nlohmann::json;

error bad(const std::string& path, const std::string& what) {
  return error{errc::bad_format, path + ": " + what};
}

error wrong_type(const std::string& path, const char* expected, const json& got) {
  return bad(path, std::string("expected ") + expected + ", found " + got.type_name());
}

error unsupported(const std::string& path, const std::string& type, const std::string& why) {
  return error{errc::unsupported, path + " '" + type + "' is not supported: " + why};
}

// A member of `obj`, or nullptr when absent or null.
const json* member(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

result<bool> get_bool(const json& obj, const std::string& path, const char* key, bool fallback) {
  const json* v = member(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return wrong_type(path + "." + key, "a boolean", *v);
  return v->get<bool>();
}

result<std::string> get_string(const json& obj, const std::string& path, const char* key) {
  const json* v = member(obj, key);
  if (v == nullptr) return bad(path, std::string("missing field '") + key + "'");
  if (!v->is_string()) return wrong_type(path + "." + key, "a string", *v);
  return v->get<std::string>();
}

result<int32_t> as_id(const json& v, const std::string& path) {
  if (!v.is_number_integer()) return wrong_type(path, "an integer id", v);
  const bool fits =
      v.is_number_unsigned()
          ? v.get<uint64_t>() <= uint64_t{std::numeric_limits<int32_t>::max()}
          : v.get<int64_t>() >= 0 && v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
  if (!fits) return bad(path, "id " + v.dump() + " is outside [0, 2^31)");
  return static_cast<int32_t>(v.get<int64_t>());
}

// The object at `path`, whose "type" field names a component; an absent type reads as "".
result<std::string> component_type(const json& v, const std::string& path) {
  if (!v.is_object()) return wrong_type(path, "an object", v);
  const json* t = member(v, "type");
  if (t == nullptr) return std::string();
  if (!t->is_string()) return wrong_type(path + ".type", "a string", *t);
  return t->get<std::string>();
}

result<bpe::merge_pair> read_merge(const json& m, const std::string& path) {
  if (m.is_string()) {
    // The older form "left right": exactly one space, as the Hugging Face library requires.
    const auto& s = m.get_ref<const std::string&>();
    const auto space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return bad(path, "merge '" + s + "' is not two tokens separated by one space");
    }
    return bpe::merge_pair{s.substr(0, space), s.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return bpe::merge_pair{m[0].get<std::string>(), m[1].get<std::string>()};
  }
  return wrong_type(path, "a string \"left right\" or a pair [\"left\", \"right\"]", m);
}

status check_bpe_options(const json& model) {
  if (const json* d = member(model, "dropout")) {
    if (!d->is_number()) return wrong_type("model.dropout", "a number or null", *d);
    const double p = d->get<double>();
    if (p > 0.0 && p < 1.0) {
      return unsupported("model.dropout", d->dump(), "BPE dropout makes encoding random");
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = member(model, key);
    if (v == nullptr) continue;
    if (!v->is_string()) return wrong_type(std::string("model.") + key, "a string", *v);
    if (!v->get_ref<const std::string&>().empty()) {
      return unsupported(std::string("model.") + key, v->get<std::string>(),
                         "only byte-level BPE without word affixes is implemented");
    }
  }
  auto byte_fallback = get_bool(model, "model", "byte_fallback", false);
  if (!byte_fallback) return byte_fallback.err();
  if (*byte_fallback) {
    return unsupported("model.byte_fallback", "true",
                       "it belongs to SentencePiece-style BPE; only byte-level BPE is implemented");
  }
  if (const json* unk = member(model, "unk_token"); unk != nullptr && !unk->is_string()) {
    return wrong_type("model.unk_token", "a string or null", *unk);
  }
  return ok_status();
}

result<bpe> read_model(const json& root) {
  const json* model = member(root, "model");
  if (model == nullptr) return bad("tokenizer.json", "missing field 'model'");
  auto type = component_type(*model, "model");
  if (!type) return type.err();
  if (!type->empty() && *type != "BPE") {
    return unsupported("model.type", *type, "brigade reads byte-level BPE tokenizers only");
  }
  if (auto s = check_bpe_options(*model); !s) return s.err();
  const json* vocab = member(*model, "vocab");
  if (vocab == nullptr) return bad("model", "missing field 'vocab'");
  if (!vocab->is_object()) return wrong_type("model.vocab", "an object of token ids", *vocab);
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    auto checked = as_id(id, "model.vocab['" + token + "']");
    if (!checked) return checked.err();
    entries.emplace_back(token, *checked);
  }
  const json* merges = member(*model, "merges");
  if (merges == nullptr) return bad("model", "missing field 'merges'");
  if (!merges->is_array()) return wrong_type("model.merges", "an array", *merges);
  std::vector<bpe::merge_pair> pairs;
  pairs.reserve(merges->size());
  for (std::size_t i = 0; i < merges->size(); ++i) {
    auto pair = read_merge((*merges)[i], "model.merges[" + std::to_string(i) + "]");
    if (!pair) return pair.err();
    pairs.push_back(std::move(*pair));
  }
  auto ignore_merges = get_bool(*model, "model", "ignore_merges", false);
  if (!ignore_merges) return ignore_merges.err();
  return bpe::create(std::move(entries), pairs, *ignore_merges);
}

status read_normalizer(const json& n, const std::string& path, normalizer& out) {
  auto type = component_type(n, path);
  if (!type) return type.err();
  if (*type == "NFC") {
    out.add(normalizer::form::nfc);
  } else if (*type == "NFD") {
    out.add(normalizer::form::nfd);
  } else if (*type == "NFKC") {
    out.add(normalizer::form::nfkc);
  } else if (*type == "NFKD") {
    out.add(normalizer::form::nfkd);
  } else if (*type == "Sequence") {
    const json* list = member(n, "normalizers");
    if (list == nullptr || !list->is_array()) {
      return wrong_type(path + ".normalizers", "an array", list ? *list : json());
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string item = path + ".normalizers[" + std::to_string(i) + "]";
      if (auto s = read_normalizer((*list)[i], item, out); !s) return s;
    }
  } else {
    return unsupported(path + ".type", *type, "only NFC, NFD, NFKC, NFKD and Sequence are");
  }
  return ok_status();
}

result<pre_tokenizer::split_behavior> read_behavior(const json& step, const std::string& path) {
  auto behavior = get_string(step, path, "behavior");
  if (!behavior) return behavior.err();
  if (*behavior == "Isolated") return pre_tokenizer::split_behavior::isolated;
  if (*behavior == "Removed") return pre_tokenizer::split_behavior::removed;
  return unsupported(path + ".behavior", *behavior, "only Isolated and Removed are implemented");
}

status read_split(const json& step, const std::string& path, pre_tokenizer& out) {
  auto behavior = read_behavior(step, path);
  if (!behavior) return behavior.err();
  auto invert = get_bool(step, path, "invert", false);
  if (!invert) return invert.err();
  const json* pattern = member(step, "pattern");
  if (pattern == nullptr || !pattern->is_object()) {
    return wrong_type(path + ".pattern", "an object {\"Regex\": ...} or {\"String\": ...}",
                      pattern ? *pattern : json());
  }
  if (member(*pattern, "Regex") != nullptr) {
    auto regex = get_string(*pattern, path + ".pattern", "Regex");
    if (!regex) return regex.err();
    status s = out.add_split_regex(*regex, *behavior, *invert);
    return s ? s : bad(path + ".pattern.Regex", s.err().message);
  }
  auto literal = get_string(*pattern, path + ".pattern", "String");
  if (!literal) return literal.err();
  status s = out.add_split_literal(*literal, *behavior, *invert);
  return s ? s : bad(path + ".pattern.String", s.err().message);
}

status read_pre_tokenizer(const json& p, const std::string& path, pre_tokenizer& out,
                          bool& has_byte_level) {
  auto type = component_type(p, path);
  if (!type) return type.err();
  if (*type == "ByteLevel") {
    auto prefix = get_bool(p, path, "add_prefix_space", true);
    if (!prefix) return prefix.err();
    auto use_regex = get_bool(p, path, "use_regex", true);
    if (!use_regex) return use_regex.err();
    has_byte_level = true;
    return out.add_byte_level(*prefix, *use_regex);
  }
  if (*type == "Split") return read_split(p, path, out);
  if (*type == "Sequence") {
    const json* list = member(p, "pretokenizers");
    if (list == nullptr || !list->is_array()) {
      return wrong_type(path + ".pretokenizers", "an array", list ? *list : json());
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string item = path + ".pretokenizers[" + std::to_string(i) + "]";
      if (auto s = read_pre_tokenizer((*list)[i], item, out, has_byte_level); !s) return s;
    }
    return ok_status();
  }
  return unsupported(path + ".type", *type,
                     "only ByteLevel, Split and Sequence are implemented (SentencePiece-style "
                     "Metaspace tokenizers are not supported)");
}

status check_decoder(const json& root) {
  const json* d = member(root, "decoder");
  if (d == nullptr) {
    return error{errc::unsupported, "decoder is null: brigade needs the ByteLevel decoder"};
  }
  auto type = component_type(*d, "decoder");
  if (!type) return type.err();
  if (*type != "ByteLevel") {
    return unsupported("decoder.type", *type, "only the ByteLevel decoder is implemented");
  }
  return ok_status();
}

result<added_token> read_added_token(const json& t, const std::string& path) {
  if (!t.is_object()) return wrong_type(path, "an object", t);
  added_token out;
  const json* id = member(t, "id");
  if (id == nullptr) return bad(path, "missing field 'id'");
  auto checked = as_id(*id, path + ".id");
  if (!checked) return checked.err();
  out.id = *checked;
  auto content = get_string(t, path, "content");
  if (!content) return content.err();
  if (content->empty()) return bad(path + ".content", "must not be empty");
  out.content = std::move(*content);
  auto special = get_bool(t, path, "special", false);
  auto lstrip = get_bool(t, path, "lstrip", false);
  auto rstrip = get_bool(t, path, "rstrip", false);
  auto single_word = get_bool(t, path, "single_word", false);
  for (const result<bool>* r : {&special, &lstrip, &rstrip, &single_word}) {
    if (!*r) return r->err();
  }
  // The Hugging Face default: special tokens are matched in raw text, others after normalizing.
  auto normalized = get_bool(t, path, "normalized", !*special);
  if (!normalized) return normalized.err();
  out.special = *special;
  out.lstrip = *lstrip;
  out.rstrip = *rstrip;
  out.single_word = *single_word;
  out.normalized = *normalized;
  return out;
}

status read_added_tokens(const json& root, added_vocabulary& out) {
  const json* list = member(root, "added_tokens");
  if (list == nullptr) return ok_status();
  if (!list->is_array()) return wrong_type("added_tokens", "an array", *list);
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto t = read_added_token((*list)[i], "added_tokens[" + std::to_string(i) + "]");
    if (!t) return t.err();
    out.add(std::move(*t));
  }
  return ok_status();
}

result<parts> parse_root(const json& root) {
  if (!root.is_object()) return wrong_type("tokenizer.json", "an object", root);
  auto model = read_model(root);
  if (!model) return model.err();
  parts out{std::move(*model), normalizer{}, pre_tokenizer{}, added_vocabulary{}, {}, {}};
  if (const json* n = member(root, "normalizer")) {
    if (auto s = read_normalizer(*n, "normalizer", out.norm); !s) return s.err();
  }
  bool has_byte_level = false;
  if (const json* p = member(root, "pre_tokenizer")) {
    if (auto s = read_pre_tokenizer(*p, "pre_tokenizer", out.pre, has_byte_level); !s) {
      return s.err();
    }
  }
  if (!has_byte_level) {
    return error{errc::unsupported,
                 "pre_tokenizer has no ByteLevel step: brigade reads byte-level BPE only"};
  }
  if (auto s = check_decoder(root); !s) return s.err();
  if (auto s = read_added_tokens(root, out.added); !s) return s.err();
  return out;
}

}  // namespace

result<parts> parse(const std::string& text, const std::string& name) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    return error{errc::bad_format, name + " is not valid JSON: " + e.what()};
  }
  auto out = parse_root(root);
  if (!out) return error{out.err().code, name + ": " + out.err().message};
  return out;
}

}  // namespace brigade::model::tokenizer_json

namespace brigade::model::tokenizer_json {
namespace {

result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return error{errc::not_found, path + " cannot be opened; check that the file exists"};
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return error{errc::io_error, path + " could not be read"};
  return text.str();
}

std::optional<int32_t> id_of(const parts& p, const std::string& token) {
  if (const added_token* t = p.added.find_content(token)) return t->id;
  return p.model.id_of(token);
}

// bos_token and eos_token are written either as a string or as an added-token object.
status resolve_special(const json& config, const char* key, const std::string& name, parts& p,
                       std::optional<int32_t>& out) {
  const json* v = member(config, key);
  if (v == nullptr) return ok_status();
  std::string token;
  if (v->is_string()) {
    token = v->get<std::string>();
  } else if (v->is_object()) {
    auto content = get_string(*v, std::string(key), "content");
    if (!content) return error{errc::bad_format, name + ": " + content.err().message};
    token = std::move(*content);
  } else {
    return error{errc::bad_format, name + ": " + key + ": expected a string, an object or null, " +
                                       "found " + v->type_name()};
  }
  out = id_of(p, token);
  if (!out) {
    return error{errc::bad_format, name + ": " + key + " '" + token +
                                       "' is neither an added token nor in model.vocab"};
  }
  return ok_status();
}

}  // namespace

result<parts> read(const std::string& tokenizer_json_path, const std::string& config_path) {
  auto text = read_file(tokenizer_json_path);
  if (!text) return text.err();
  auto p = parse(*text, tokenizer_json_path);
  if (!p || config_path.empty()) return p;
  auto config_text = read_file(config_path);
  if (!config_text) return config_text.err();
  json config;
  try {
    config = json::parse(*config_text);
  } catch (const json::exception& e) {
    return error{errc::bad_format, config_path + " is not valid JSON: " + e.what()};
  }
  if (!config.is_object()) {
    return error{errc::bad_format,
                 config_path + ": expected an object, found " + std::string(config.type_name())};
  }
  if (auto s = resolve_special(config, "bos_token", config_path, *p, p->bos_id); !s) {
    return s.err();
  }
  if (auto s = resolve_special(config, "eos_token", config_path, *p, p->eos_id); !s) {
    return s.err();
  }
  return p;
}

}  // namespace brigade::model::tokenizer_json
