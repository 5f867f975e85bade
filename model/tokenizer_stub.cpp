// Temporary stand-in until the tokenizer lands: prompts must be given as ids.
#include "model/tokenizer.hpp"
#include "model/tokenizer_builder.hpp"

namespace brigade::model {

struct tokenizer::impl {};
tokenizer::tokenizer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
tokenizer::tokenizer(tokenizer&&) noexcept = default;
tokenizer& tokenizer::operator=(tokenizer&&) noexcept = default;
tokenizer::~tokenizer() = default;
result<tokenizer> tokenizer::load(const std::string& dir) {
  return error(errc::unsupported, dir + ": the tokenizer is not built yet");
}
std::vector<int32_t> tokenizer::encode(std::string_view) const { return {}; }
std::string tokenizer::decode(const std::vector<int32_t>&, bool) const { return ""; }
std::optional<int32_t> tokenizer::eos_id() const { return std::nullopt; }
status write_byte_level_tokenizer(const std::string&, const tokenizer_spec&) { return {}; }

}  // namespace brigade::model
