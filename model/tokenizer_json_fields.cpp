#include "model/tokenizer_json_fields.hpp"

#include <limits>

#include "model/utf8.hpp"

namespace brigade::model::tokenizer_json {

error bad(const std::string& path, const std::string& what) {
  return error{errc::bad_format, path + ": " + what};
}

error wrong_type(const std::string& path, const char* expected, const json& got) {
  return bad(path, std::string("expected ") + expected + ", found " + got.type_name());
}

error unsupported(const std::string& path, const std::string& value, const std::string& why) {
  return error{errc::unsupported, path + " '" + value + "' is not supported: " + why};
}

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

result<std::string> get_char(const json& obj, const std::string& path, const char* key) {
  auto s = get_string(obj, path, key);
  if (!s) return s;
  std::size_t pos = 0;
  if (!s->empty()) utf8::next(*s, pos);
  if (s->empty() || pos != s->size()) {
    return bad(path + "." + key, "'" + *s + "' must be exactly one character");
  }
  return s;
}

result<std::size_t> get_size(const json& obj, const std::string& path, const char* key,
                             std::size_t fallback) {
  const json* v = member(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_number_unsigned()) {
    return wrong_type(path + "." + key, "a non-negative integer", *v);
  }
  return static_cast<std::size_t>(v->get<uint64_t>());
}

result<const json*> get_array(const json& obj, const std::string& path, const char* key) {
  const json* v = member(obj, key);
  if (v == nullptr) return bad(path, std::string("missing field '") + key + "'");
  if (!v->is_array()) return wrong_type(path + "." + key, "an array", *v);
  return v;
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

result<std::string> component_type(const json& v, const std::string& path) {
  if (!v.is_object()) return wrong_type(path, "an object", v);
  const json* t = member(v, "type");
  if (t == nullptr) return std::string();
  if (!t->is_string()) return wrong_type(path + ".type", "a string", *t);
  return t->get<std::string>();
}

result<pattern> get_pattern(const json& obj, const std::string& path) {
  const json* p = member(obj, "pattern");
  if (p == nullptr || !p->is_object()) {
    return wrong_type(path + ".pattern", "an object {\"Regex\": ...} or {\"String\": ...}",
                      p ? *p : json());
  }
  const bool is_regex = member(*p, "Regex") != nullptr;
  auto text = get_string(*p, path + ".pattern", is_regex ? "Regex" : "String");
  if (!text) return text.err();
  return pattern{std::move(*text), is_regex};
}

}  // namespace brigade::model::tokenizer_json
