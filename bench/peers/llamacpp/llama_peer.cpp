#include "bench/peers/llamacpp/llama_peer.hpp"

#include <chrono>
#include <sstream>

namespace brigade::bench::llamacpp {
namespace {

// Loading maps the model; a command on a loaded 2-core machine may take a while.
constexpr auto start_timeout = std::chrono::seconds(120);
constexpr auto command_timeout = std::chrono::seconds(600);

}  // namespace

result<llama_peer> llama_peer::start(const toolchain& tc, const std::string& gguf,
                                     const std::string& cpu_lib, int threads) {
  subprocess::options opt;
  opt.argv = {tc.driver, "--model", gguf, "--threads", std::to_string(threads)};
  if (cpu_lib.empty()) {
    opt.argv.insert(opt.argv.end(), {"--lib-dir", tc.lib_dir});
  } else {
    opt.argv.insert(opt.argv.end(), {"--cpu-lib", cpu_lib});
  }
  opt.stderr_path = tc.dir + "/llama_driver.log";
  auto proc = subprocess::spawn(opt);
  if (!proc) return proc.err();
  llama_peer peer(std::move(proc.value()));
  auto line = peer.proc_.read_line(start_timeout);
  if (!line) {
    return error(errc::unavailable, "the llama.cpp driver did not start (" + line.err().message +
                                        "); see " + opt.stderr_path);
  }
  // "ready vocab V threads N variant NAME"
  std::istringstream words(line.value());
  std::string word, value;
  words >> word;
  while (words >> word >> value) {
    if (word == "variant") peer.variant_ = value;
  }
  if (line->rfind("ready", 0) != 0) {
    return error(errc::unavailable, "the llama.cpp driver said: " + line.value());
  }
  return peer;
}

llama_peer::~llama_peer() {
  if (proc_.pid() > 0) {
    (void)proc_.write_line("quit");
    (void)proc_.wait(std::chrono::seconds(10));
  }
}

result<std::string> llama_peer::ask(const std::string& command, const std::string& reply) {
  status s = proc_.write_line(command);
  if (!s) return s.err();
  auto line = proc_.read_line(command_timeout);
  if (!line) return error(errc::unavailable, "llama.cpp driver: " + line.err().message);
  if (line->rfind(reply + " ", 0) != 0) {
    return error(errc::unavailable,
                 "llama.cpp driver, on '" + command.substr(0, 40) + "': " + line.value());
  }
  return line->substr(reply.size() + 1);
}

result<std::vector<int32_t>> llama_peer::greedy(const std::vector<int32_t>& prompt, int tokens) {
  std::string command = "greedy " + std::to_string(tokens);
  for (int32_t id : prompt)
    command += " " + std::to_string(id);
  auto reply = ask(command, "tokens");
  if (!reply) return reply.err();
  std::vector<int32_t> ids;
  std::istringstream words(reply.value());
  for (int32_t id = 0; words >> id;)
    ids.push_back(id);
  return ids;
}

result<double> llama_peer::prefill_tokens_per_s(int tokens, int trials) {
  auto reply = ask("prefill " + std::to_string(tokens) + " " + std::to_string(trials), "prefill");
  if (!reply) return reply.err();
  return tokens / std::stod(reply.value());
}

result<double> llama_peer::decode_tokens_per_s(int batch, int steps, int prompt_tokens) {
  auto reply = ask("decode " + std::to_string(batch) + " " + std::to_string(steps) + " " +
                       std::to_string(prompt_tokens),
                   "decode");
  if (!reply) return reply.err();
  return batch * steps / std::stod(reply.value());
}

}  // namespace brigade::bench::llamacpp
