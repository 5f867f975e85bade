// Checked reads of tokenizer.json fields, shared by the readers of its sections. Every error
// names the field by its path ("pre_tokenizer.pretokenizers[2].pattern.Regex").
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/result.hpp"

namespace brigade::model::tokenizer_json {

using json = nlohmann::json;

/// A bad_format error: "PATH: WHAT".
error bad(const std::string& path, const std::string& what);
/// A bad_format error saying what `path` should hold and what it holds.
error wrong_type(const std::string& path, const char* expected, const json& got);
/// An unsupported error: "PATH 'VALUE' is not supported: WHY".
error unsupported(const std::string& path, const std::string& value, const std::string& why);

/// A member of `obj`, or nullptr when absent or null.
const json* member(const json& obj, const char* key);

result<bool> get_bool(const json& obj, const std::string& path, const char* key, bool fallback);
/// A required string member.
result<std::string> get_string(const json& obj, const std::string& path, const char* key);
/// A required string member holding exactly one character.
result<std::string> get_char(const json& obj, const std::string& path, const char* key);
/// A non-negative integer member, or `fallback` when absent.
result<std::size_t> get_size(const json& obj, const std::string& path, const char* key,
                             std::size_t fallback);
/// A required array member.
result<const json*> get_array(const json& obj, const std::string& path, const char* key);

/// `v` as a token id in [0, 2^31).
result<int32_t> as_id(const json& v, const std::string& path);

/// The "type" of the component object at `path`; an absent type reads as "".
result<std::string> component_type(const json& v, const std::string& path);

/// A pattern object, {"String": "..."} or {"Regex": "..."}.
struct pattern {
  std::string text;
  bool is_regex = false;
};
result<pattern> get_pattern(const json& obj, const std::string& path);

}  // namespace brigade::model::tokenizer_json
