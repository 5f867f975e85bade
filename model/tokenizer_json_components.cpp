#include "model/tokenizer_json_components.hpp"

namespace brigade::model::tokenizer_json {
namespace {

std::string item_path(const std::string& path, const char* list, std::size_t i) {
  return path + "." + list + "[" + std::to_string(i) + "]";
}

// A regex or literal that does not compile is named by the pattern field that holds it.
status pattern_error(const std::string& path, const pattern& p, const status& s) {
  if (s) return s;
  return error{s.err().code,
               path + ".pattern." + (p.is_regex ? "Regex" : "String") + ": " + s.err().message};
}

result<pre_tokenizer::split_behavior> read_behavior(const json& step, const std::string& path) {
  using behavior = pre_tokenizer::split_behavior;
  auto name = get_string(step, path, "behavior");
  if (!name) return name.err();
  if (*name == "Isolated") return behavior::isolated;
  if (*name == "Removed") return behavior::removed;
  if (*name == "MergedWithPrevious") return behavior::merged_with_previous;
  if (*name == "MergedWithNext") return behavior::merged_with_next;
  if (*name == "Contiguous") return behavior::contiguous;
  return unsupported(path + ".behavior", *name,
                     "the Hugging Face behaviors are Isolated, Removed, MergedWithPrevious, "
                     "MergedWithNext and Contiguous");
}

status read_split(const json& step, const std::string& path, pre_tokenizer& out) {
  auto behavior = read_behavior(step, path);
  if (!behavior) return behavior.err();
  auto invert = get_bool(step, path, "invert", false);
  if (!invert) return invert.err();
  auto p = get_pattern(step, path);
  if (!p) return p.err();
  return pattern_error(path, *p,
                       p->is_regex ? out.add_split_regex(p->text, *behavior, *invert)
                                   : out.add_split_literal(p->text, *behavior, *invert));
}

// Metaspace's prepend_scheme; the older add_prefix_space: false means "never".
result<pre_tokenizer::prepend_scheme> read_prepend_scheme(const json& m, const std::string& path) {
  using scheme = pre_tokenizer::prepend_scheme;
  auto add_prefix_space = get_bool(m, path, "add_prefix_space", true);
  if (!add_prefix_space) return add_prefix_space.err();
  scheme out = scheme::always;
  if (member(m, "prepend_scheme") != nullptr) {
    auto name = get_string(m, path, "prepend_scheme");
    if (!name) return name.err();
    if (*name == "first") {
      out = scheme::first;
    } else if (*name == "never") {
      out = scheme::never;
    } else if (*name != "always") {
      return unsupported(path + ".prepend_scheme", *name, "it is one of always, first, never");
    }
  }
  return *add_prefix_space ? out : scheme::never;
}

status read_metaspace(const json& m, const std::string& path, pre_tokenizer& out) {
  auto replacement = get_char(m, path, "replacement");
  if (!replacement) return replacement.err();
  auto scheme = read_prepend_scheme(m, path);
  if (!scheme) return scheme.err();
  auto split = get_bool(m, path, "split", true);
  if (!split) return split.err();
  return out.add_metaspace(*replacement, *scheme, *split);
}

status read_byte_level(const json& b, const std::string& path, pre_tokenizer& out) {
  auto prefix = get_bool(b, path, "add_prefix_space", true);
  if (!prefix) return prefix.err();
  auto use_regex = get_bool(b, path, "use_regex", true);
  if (!use_regex) return use_regex.err();
  // trim_offsets only moves offsets, which brigade does not report; its type is still checked.
  if (auto trim = get_bool(b, path, "trim_offsets", true); !trim) return trim.err();
  return out.add_byte_level(*prefix, *use_regex);
}

// A required non-negative integer field.
result<std::size_t> get_required_size(const json& obj, const std::string& path, const char* key) {
  if (member(obj, key) == nullptr) return bad(path, std::string("missing field '") + key + "'");
  return get_size(obj, path, key, 0);
}

status read_decoder_step(const std::string& t, const json& d, const std::string& path,
                         decoder& out) {
  if (t == "ByteLevel") {
    out.add_byte_level();
  } else if (t == "ByteFallback") {
    out.add_byte_fallback();
  } else if (t == "Fuse") {
    out.add_fuse();
  } else if (t == "Metaspace") {
    auto replacement = get_char(d, path, "replacement");
    if (!replacement) return replacement.err();
    auto scheme = read_prepend_scheme(d, path);
    if (!scheme) return scheme.err();
    return out.add_metaspace(*replacement, *scheme != pre_tokenizer::prepend_scheme::never);
  } else if (t == "Replace") {
    auto p = get_pattern(d, path);
    if (!p) return p.err();
    auto content = get_string(d, path, "content");
    if (!content) return content.err();
    return pattern_error(path, *p, out.add_replace(p->text, p->is_regex, std::move(*content)));
  } else if (t == "Strip") {
    auto content = get_char(d, path, "content");
    if (!content) return content.err();
    auto start = get_required_size(d, path, "start");
    if (!start) return start.err();
    auto stop = get_required_size(d, path, "stop");
    if (!stop) return stop.err();
    out.add_strip(std::move(*content), *start, *stop);
  } else {
    return unsupported(path + ".type", t,
                       "brigade implements the ByteLevel, Metaspace, Replace, ByteFallback, "
                       "Fuse, Strip and Sequence decoders");
  }
  return ok_status();
}

// One item of a TemplateProcessing "single" template: {"SpecialToken": {"id": ...}} or
// {"Sequence": {"id": "A"}}.
result<post_processor::item> read_template_item(const json& piece, const json& specials,
                                                const std::string& path) {
  if (const json* seq = member(piece, "Sequence")) {
    auto id = get_string(*seq, path + ".Sequence", "id");
    if (!id) return id.err();
    if (*id != "A") {
      return unsupported(path + ".Sequence.id", *id, "a single-sequence template holds only A");
    }
    return post_processor::item{true, {}};
  }
  const json* special = member(piece, "SpecialToken");
  if (special == nullptr) return bad(path, "expected a SpecialToken or a Sequence");
  auto name = get_string(*special, path + ".SpecialToken", "id");
  if (!name) return name.err();
  const json* entry = specials.is_object() ? member(specials, name->c_str()) : nullptr;
  if (entry == nullptr) {
    return bad(path + ".SpecialToken.id", "'" + *name + "' is not in special_tokens");
  }
  const std::string entry_path = "special_tokens['" + *name + "']";
  auto ids = get_array(*entry, entry_path, "ids");
  if (!ids) return ids.err();
  post_processor::item out;
  for (std::size_t i = 0; i < (*ids)->size(); ++i) {
    auto id = as_id((**ids)[i], entry_path + ".ids[" + std::to_string(i) + "]");
    if (!id) return id.err();
    out.ids.push_back(*id);
  }
  return out;
}

status read_template(const json& p, const std::string& path, post_processor& out) {
  auto single = get_array(p, path, "single");
  if (!single) return single.err();
  const json* specials = member(p, "special_tokens");
  std::vector<post_processor::item> items;
  for (std::size_t i = 0; i < (*single)->size(); ++i) {
    auto item = read_template_item((**single)[i], specials ? *specials : json(),
                                   item_path(path, "single", i));
    if (!item) return item.err();
    items.push_back(std::move(*item));
  }
  out.add_template(std::move(items));
  return ok_status();
}

}  // namespace

status read_normalizer(const json& n, const std::string& path, normalizer& out) {
  auto type = component_type(n, path);
  if (!type) return type.err();
  const std::string& t = *type;
  if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") {
    out.add(t == "NFC"    ? normalizer::form::nfc
            : t == "NFD"  ? normalizer::form::nfd
            : t == "NFKC" ? normalizer::form::nfkc
                          : normalizer::form::nfkd);
  } else if (t == "Prepend") {
    auto prefix = get_string(n, path, "prepend");
    if (!prefix) return prefix.err();
    out.add_prepend(std::move(*prefix));
  } else if (t == "Replace") {
    auto p = get_pattern(n, path);
    if (!p) return p.err();
    auto content = get_string(n, path, "content");
    if (!content) return content.err();
    return pattern_error(path, *p, out.add_replace(p->text, p->is_regex, std::move(*content)));
  } else if (t == "Sequence") {
    auto list = get_array(n, path, "normalizers");
    if (!list) return list.err();
    for (std::size_t i = 0; i < (*list)->size(); ++i) {
      const std::string item = item_path(path, "normalizers", i);
      if (auto s = read_normalizer((**list)[i], item, out); !s) return s;
    }
  } else {
    return unsupported(path + ".type", t,
                       "brigade implements the NFC, NFD, NFKC, NFKD, Prepend, Replace and "
                       "Sequence normalizers");
  }
  return ok_status();
}

status read_pre_tokenizer(const json& p, const std::string& path, pre_tokenizer& out) {
  auto type = component_type(p, path);
  if (!type) return type.err();
  if (*type == "Sequence") {
    auto list = get_array(p, path, "pretokenizers");
    if (!list) return list.err();
    for (std::size_t i = 0; i < (*list)->size(); ++i) {
      const std::string item = item_path(path, "pretokenizers", i);
      if (auto s = read_pre_tokenizer((**list)[i], item, out); !s) return s;
    }
    return ok_status();
  }
  if (out.has_byte_level()) {
    return unsupported(path + ".type", *type,
                       "no step may follow ByteLevel, since brigade maps bytes to characters "
                       "inside the BPE model");
  }
  if (*type == "ByteLevel") return read_byte_level(p, path, out);
  if (*type == "Split") return read_split(p, path, out);
  if (*type == "Metaspace") return read_metaspace(p, path, out);
  return unsupported(path + ".type", *type,
                     "brigade implements the ByteLevel, Split, Metaspace and Sequence "
                     "pre-tokenizers");
}

status read_decoder(const json& d, const std::string& path, decoder& out) {
  auto type = component_type(d, path);
  if (!type) return type.err();
  if (*type != "Sequence") return read_decoder_step(*type, d, path, out);
  auto list = get_array(d, path, "decoders");
  if (!list) return list.err();
  for (std::size_t i = 0; i < (*list)->size(); ++i) {
    if (auto s = read_decoder((**list)[i], item_path(path, "decoders", i), out); !s) return s;
  }
  return ok_status();
}

status read_post_processor(const json& p, const std::string& path, post_processor& out) {
  auto type = component_type(p, path);
  if (!type) return type.err();
  if (*type == "ByteLevel") return ok_status();  // It only trims offsets.
  if (*type == "TemplateProcessing") return read_template(p, path, out);
  if (*type == "Sequence") {
    auto list = get_array(p, path, "processors");
    if (!list) return list.err();
    for (std::size_t i = 0; i < (*list)->size(); ++i) {
      const std::string item = item_path(path, "processors", i);
      if (auto s = read_post_processor((**list)[i], item, out); !s) return s;
    }
    return ok_status();
  }
  return unsupported(path + ".type", *type,
                     "brigade implements the TemplateProcessing, ByteLevel and Sequence "
                     "post-processors");
}

}  // namespace brigade::model::tokenizer_json
