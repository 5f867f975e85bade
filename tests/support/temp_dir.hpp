// A fresh directory under the build tree for one test, removed when the test ends.
#pragma once

#include <filesystem>
#include <random>
#include <string>

namespace brigade::testing {

class temp_dir {
 public:
  explicit temp_dir(const std::string& tag) {
    std::random_device rd;
    path_ =
        std::filesystem::path(BRIGADE_BINARY_DIR) / "test-tmp" / (tag + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace brigade::testing
