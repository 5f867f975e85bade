// The roles running in a node's process, by name, readable from any thread: what a node that is
// forced to exit names as still running.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace brigade::cluster {

class role_census {
 public:
  void add(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    names_.insert(name);
  }
  void remove(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    names_.erase(name);
  }
  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {names_.begin(), names_.end()};
  }

 private:
  mutable std::mutex mutex_;
  std::multiset<std::string> names_;  // a respawn may overlap the old role's end
};

}  // namespace brigade::cluster
