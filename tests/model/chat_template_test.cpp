// The chat formats, rendered exactly.
#include <catch2/catch.hpp>

#include "model/chat_template.hpp"

namespace {

using namespace brigade::model;

const std::vector<chat_message> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "2+2?"}};

}  // namespace

TEST_CASE("model types map to their chat formats", "[chat_template]") {
  CHECK(chat_format_for("qwen2_moe") == chat_format::chatml);
  CHECK(chat_format_for("qwen3_moe") == chat_format::chatml);
  CHECK(chat_format_for("mixtral") == chat_format::mistral_inst);
  CHECK(chat_format_for("olmoe") == chat_format::tulu);
  CHECK(chat_format_for("something_new") == chat_format::chatml);
}

TEST_CASE("chatml wraps every turn and opens the assistant's", "[chat_template]") {
  CHECK(render_chat(chat_format::chatml, kConversation, true) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n");
  CHECK(render_chat(chat_format::chatml, {{"user", "x"}}, false) ==
        "<|im_start|>user\nx<|im_end|>\n");
}

TEST_CASE("mistral_inst folds the system prompt into the first user turn", "[chat_template]") {
  CHECK(render_chat(chat_format::mistral_inst, kConversation, true) ==
        "<s>[INST] Be brief.\n\nHi [/INST] Hello.</s>[INST] 2+2? [/INST]");
  CHECK(render_chat(chat_format::mistral_inst, {{"user", "x"}}, false) == "<s>[INST] x [/INST]");
}

TEST_CASE("tulu labels each turn and ends answers with eos", "[chat_template]") {
  CHECK(render_chat(chat_format::tulu, kConversation, true) ==
        "<|system|>\nBe brief.\n"
        "<|user|>\nHi\n"
        "<|assistant|>\nHello.<|endoftext|>\n"
        "<|user|>\n2+2?\n"
        "<|assistant|>\n");
  CHECK(render_chat(chat_format::tulu, {}, true) == "<|assistant|>\n");
}
