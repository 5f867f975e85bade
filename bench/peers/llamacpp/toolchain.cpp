#include "bench/peers/llamacpp/toolchain.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/peers/llamacpp/peer_sources.hpp"
#include "common/subprocess.hpp"

namespace brigade::bench::llamacpp {
namespace {

namespace fs = std::filesystem;

constexpr auto npm_timeout = std::chrono::minutes(10);
constexpr auto tool_timeout = std::chrono::minutes(3);

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::error_code ec;
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (fs::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

// Runs a program to completion; its output (stdout and stderr) comes back, or an error with the
// output's last lines when it fails.
result<std::string> run(std::vector<std::string> argv, const std::string& working_dir,
                        std::chrono::milliseconds timeout) {
  const std::string shown = argv[0] + (argv.size() > 1 ? " " + argv[1] : "");
  subprocess::options opt;
  opt.argv = std::move(argv);
  opt.merge_stderr = true;
  opt.working_dir = working_dir;
  auto child = subprocess::spawn(opt);
  if (!child) return child.err();
  child->close_stdin();
  auto out = child->read_all(timeout);
  if (!out) return error(errc::unavailable, shown + ": " + out.err().message);
  auto code = child->wait(std::chrono::seconds(10));
  if (!code) return code.err();
  if (code.value() != 0) {
    const std::string& text = out.value();
    return error(errc::unavailable, shown + " failed (exit " + std::to_string(code.value()) +
                                        "):\n" +
                                        text.substr(text.size() > 3000 ? text.size() - 3000 : 0));
  }
  return out;
}

// Writes `text` to `path` unless the file already holds exactly that; true when it wrote.
result<bool> write_if_changed(const std::string& path, const std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::stringstream held;
    held << in.rdbuf();
    if (held.str() == text) return false;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) return error(errc::io_error, path + ": cannot write it");
  return true;
}

std::string json_field(const std::string& path, const char* key) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

status install_packages(toolchain& t) {
  auto wrote = write_if_changed(t.dir + "/package.json", package_json);
  if (!wrote) return wrote.err();
  const std::string pkg = t.dir + "/node_modules/@node-llama-cpp/linux-x64/package.json";
  const std::string wanted =
      nlohmann::json::parse(package_json)["dependencies"]["@node-llama-cpp/linux-x64"]
          .get<std::string>();
  if (json_field(pkg, "version") != wanted) {
    std::fprintf(stderr, "npm install in %s (node-llama-cpp %s) ...\n", t.dir.c_str(),
                 wanted.c_str());
    // No install scripts: node-llama-cpp's would probe for GPUs and may fetch or build more.
    auto done =
        run({"npm", "install", "--no-audit", "--no-fund", "--omit=optional", "--ignore-scripts"},
            t.dir, npm_timeout);
    if (!done) return done.err();
  }
  t.package_version = json_field(pkg, "version");
  t.lib_dir = t.dir + "/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64";
  t.llama_release =
      json_field(t.dir + "/node_modules/node-llama-cpp/llama/llama.cpp.info.json", "tag");
  if (!fs::exists(t.lib_dir))
    return error(errc::not_found, t.lib_dir + ": missing after npm install");
  if (fs::exists(t.lib_dir + "/libggml-cpu-haswell.so")) {
    t.avx2_cpu_lib = t.lib_dir + "/libggml-cpu-haswell.so";
  }
  return ok_status();
}

// Only include/ and ggml/include/ of the bundled source are checked out.
status unpack_headers(const toolchain& t, const std::string& src) {
  if (fs::exists(src + "/include/llama.h") && fs::exists(src + "/ggml/include/ggml-cpu.h")) {
    return ok_status();
  }
  std::fprintf(stderr, "unpacking llama.cpp's headers from node-llama-cpp's git bundle ...\n");
  std::error_code ec;
  fs::remove_all(src, ec);
  const std::string bundle = t.dir + "/node_modules/node-llama-cpp/llama/gitRelease.bundle";
  auto cloned = run({"git", "clone", "--quiet", "--no-checkout", bundle, src}, t.dir, tool_timeout);
  if (!cloned) return cloned.err();
  auto out = run({"git", "-C", src, "checkout", "--quiet", "HEAD", "--", "include", "ggml/include"},
                 t.dir, tool_timeout);
  return out ? ok_status() : status(out.err());
}

// libllama.<version>.so and libggml.<version>.so: the names differ between releases.
result<std::string> library_named(const std::string& dir, const std::string& stem) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem + ".", 0) == 0 && name.size() > 3 &&
        name.compare(name.size() - 3, 3, ".so") == 0) {
      return name;
    }
  }
  return error(errc::not_found, dir + ": no " + stem + ".*.so");
}

status build_driver(toolchain& t, const std::string& src) {
  const std::string c_file = t.dir + "/llama_driver.c";
  auto wrote = write_if_changed(c_file, llama_driver_c);
  if (!wrote) return wrote.err();
  t.driver = t.dir + "/llama_driver";
  if (!wrote.value() && fs::exists(t.driver)) return ok_status();
  auto llama = library_named(t.lib_dir, "libllama");
  if (!llama) return llama.err();
  auto ggml = library_named(t.lib_dir, "libggml");
  if (!ggml) return ggml.err();
  std::fprintf(stderr, "gcc llama_driver.c ...\n");
  auto built =
      run({"gcc", "-O2", "-std=c11", "-Wall", "-o", t.driver, c_file, "-I", src + "/include", "-I",
           src + "/ggml/include", "-L", t.lib_dir, "-l:" + llama.value(), "-l:" + ggml.value(),
           "-l:libggml-base.so", "-Wl,-rpath," + t.lib_dir},
          t.dir, tool_timeout);
  return built ? ok_status() : status(built.err());
}

}  // namespace

status check_programs() {
  std::string missing;
  for (const char* program : {"node", "npm", "gcc", "git"}) {
    if (!on_path(program)) missing += std::string(missing.empty() ? "" : ", ") + program;
  }
  if (missing.empty()) return ok_status();
  return error(errc::unavailable,
               "--peer llamacpp needs node and npm (to fetch llama.cpp's prebuilt libraries), "
               "gcc (to build its driver) and git (to unpack llama.cpp's headers); not on PATH: " +
                   missing + ". On Debian: apt-get install nodejs npm gcc git");
}

result<toolchain> prepare_toolchain(const std::string& dir) {
  status s = check_programs();
  if (!s) return s.err();
  toolchain t;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return error(errc::io_error, dir + ": cannot create it: " + ec.message());
  t.dir = fs::absolute(dir).string();
  s = install_packages(t);
  const std::string src = t.dir + "/llama-src";
  if (s) s = unpack_headers(t, src);
  if (s) s = build_driver(t, src);
  if (!s) return s.err();
  return t;
}

std::string default_toolchain_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return (fs::temp_directory_path() / "brigade-peers" / "llamacpp").string();
  return (exe.parent_path() / "peers" / "llamacpp").string();
}

}  // namespace brigade::bench::llamacpp
