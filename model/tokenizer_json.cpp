#include "model/tokenizer_json.hpp"

#include <fstream>
#include <sstream>

#include "model/tokenizer_json_components.hpp"
#include "model/tokenizer_json_fields.hpp"

namespace brigade::model::tokenizer_json {
namespace {

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

result<bpe::options> read_bpe_options(const json& model, bool byte_level) {
  if (const json* d = member(model, "dropout")) {
    if (!d->is_number()) return wrong_type("model.dropout", "a number or null", *d);
    if (d->get<double>() != 0.0) {
      return unsupported("model.dropout", d->dump(), "BPE dropout makes encoding random");
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = member(model, key);
    if (v == nullptr) continue;
    if (!v->is_string()) return wrong_type(std::string("model.") + key, "a string", *v);
    if (!v->get_ref<const std::string&>().empty()) {
      return unsupported(std::string("model.") + key, v->get<std::string>(),
                         "brigade implements BPE without word affixes");
    }
  }
  bpe::options opts;
  opts.byte_level = byte_level;
  auto byte_fallback = get_bool(model, "model", "byte_fallback", false);
  auto fuse_unk = get_bool(model, "model", "fuse_unk", false);
  auto ignore_merges = get_bool(model, "model", "ignore_merges", false);
  for (const result<bool>* r : {&byte_fallback, &fuse_unk, &ignore_merges}) {
    if (!*r) return r->err();
  }
  opts.byte_fallback = *byte_fallback;
  opts.fuse_unk = *fuse_unk;
  opts.ignore_merges = *ignore_merges;
  if (const json* unk = member(model, "unk_token")) {
    if (!unk->is_string()) return wrong_type("model.unk_token", "a string or null", *unk);
    opts.unk_token = unk->get<std::string>();
  }
  return opts;
}

// The model, a byte-level one when the pre-tokenizer has a ByteLevel step.
result<bpe> read_model(const json& root, bool byte_level) {
  const json* model = member(root, "model");
  if (model == nullptr) return bad("tokenizer.json", "missing field 'model'");
  auto type = component_type(*model, "model");
  if (!type) return type.err();
  if (!type->empty() && *type != "BPE") {
    return unsupported("model.type", *type, "brigade reads BPE tokenizers only");
  }
  auto opts = read_bpe_options(*model, byte_level);
  if (!opts) return opts.err();
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
  return bpe::create(std::move(entries), pairs, *opts);
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

// A normalized token is matched as the normalizer writes its content, as the Hugging Face
// library matches it.
status read_added_tokens(const json& root, const normalizer& norm, added_vocabulary& out) {
  const json* list = member(root, "added_tokens");
  if (list == nullptr) return ok_status();
  if (!list->is_array()) return wrong_type("added_tokens", "an array", *list);
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto t = read_added_token((*list)[i], "added_tokens[" + std::to_string(i) + "]");
    if (!t) return t.err();
    std::string pattern = t->normalized ? norm.apply(t->content) : t->content;
    out.add(std::move(*t), std::move(pattern));
  }
  return ok_status();
}

// Truncation and padding change what one text encodes to; brigade does neither.
status check_no_truncation(const json& root) {
  for (const char* key : {"truncation", "padding"}) {
    if (const json* v = member(root, key)) {
      return unsupported(key, v->dump(), "brigade never truncates or pads a prompt");
    }
  }
  return ok_status();
}

status read_text_pipeline(const json& root, normalizer& norm, pre_tokenizer& pre) {
  if (const json* n = member(root, "normalizer")) {
    if (auto s = read_normalizer(*n, "normalizer", norm); !s) return s;
  }
  if (const json* p = member(root, "pre_tokenizer")) {
    if (auto s = read_pre_tokenizer(*p, "pre_tokenizer", pre); !s) return s;
  }
  return ok_status();
}

status read_id_pipeline(const json& root, decoder& dec, post_processor& post) {
  const json* d = member(root, "decoder");
  if (d == nullptr) {
    return error{errc::unsupported,
                 "decoder is null: the Hugging Face library then joins tokens with spaces, "
                 "which no model brigade serves wants"};
  }
  if (auto s = read_decoder(*d, "decoder", dec); !s) return s;
  if (const json* p = member(root, "post_processor")) {
    if (auto s = read_post_processor(*p, "post_processor", post); !s) return s;
  }
  return ok_status();
}

result<parts> parse_root(const json& root) {
  if (!root.is_object()) return wrong_type("tokenizer.json", "an object", root);
  if (member(root, "model") == nullptr) return bad("tokenizer.json", "missing field 'model'");
  if (auto s = check_no_truncation(root); !s) return s.err();
  normalizer norm;
  pre_tokenizer pre;
  if (auto s = read_text_pipeline(root, norm, pre); !s) return s.err();
  // A ByteLevel pre-tokenizer makes the model work on bytes.
  auto model = read_model(root, pre.has_byte_level());
  if (!model) return model.err();
  parts out{std::move(*model), std::move(norm), std::move(pre), {}, {}, {}, {}, {}};
  if (auto s = read_id_pipeline(root, out.dec, out.post); !s) return s.err();
  if (auto s = read_added_tokens(root, out.norm, out.added); !s) return s.err();
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
