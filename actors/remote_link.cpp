#include "actors/remote_link.hpp"

#include <atomic>

namespace brigade::actors {
namespace {

std::atomic<remote_link*> installed{nullptr};

}  // namespace

remote_link* remote_link::current() {
  return installed.load(std::memory_order_acquire);
}

void remote_link::install(remote_link* link) {
  installed.store(link, std::memory_order_release);
}

}  // namespace brigade::actors
