// chat_parity_tool MODEL_DIR CASES.json OUT.json: renders each case with brigade's chat format for
// the model (model::render_chat_json), for chat_parity.py to compare with jinja2's rendering.
// CASES is a list of {"conversation": messages or {"messages", "tools"}, "add_generation_prompt"};
// OUT gets one {"text"} or {"error"} per case, in order.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "model/chat_template.hpp"

namespace {

using json = nlohmann::ordered_json;

int fail(const std::string& message) {
  std::fprintf(stderr, "chat_parity_tool: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return fail("usage: chat_parity_tool MODEL_DIR CASES.json OUT.json");
  std::ifstream in(argv[2], std::ios::binary);
  const json cases =
      json::parse(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()),
                  nullptr, false);
  if (!cases.is_array()) return fail(std::string(argv[2]) + " is not a JSON list of cases");
  json out = json::array();
  for (const json& c : cases) {
    const bool generation_prompt = c.value("add_generation_prompt", false);
    auto text =
        brigade::model::render_chat_json(argv[1], c.at("conversation").dump(), generation_prompt);
    out.push_back(text ? json{{"text", text.value()}} : json{{"error", text.err().message}});
  }
  std::ofstream(argv[3], std::ios::binary) << out.dump(1) << "\n";
  return 0;
}
