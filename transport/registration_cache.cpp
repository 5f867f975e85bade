#include "transport/registration_cache.hpp"

#include <algorithm>

namespace brigade::transport {
namespace {

bool same_owner(const std::weak_ptr<std::byte>& a, const std::shared_ptr<std::byte>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

}  // namespace

result<std::shared_ptr<memory_registration>> registration_cache::acquire(
    const byte_buffer& buffer) {
  ++clock_;
  for (entry& e : entries_) {
    if (same_owner(e.owner, buffer.owner()) &&
        e.registration->covers(buffer.data(), buffer.size())) {
      e.last_use = clock_;
      ++hits_;
      return e.registration;
    }
  }
  ++misses_;
  result<std::shared_ptr<memory_registration>> fresh =
      memory_registration::map(context_, buffer.data(), buffer.size());
  if (!fresh) return fresh;
  drop_dead_and_excess();
  entries_.push_back(entry{buffer.owner(), *fresh, clock_});
  return fresh;
}

void registration_cache::drop_dead_and_excess() {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [](const entry& e) { return e.owner.expired(); }),
                 entries_.end());
  while (entries_.size() >= max_entries_) {
    auto oldest =
        std::min_element(entries_.begin(), entries_.end(),
                         [](const entry& a, const entry& b) { return a.last_use < b.last_use; });
    entries_.erase(oldest);
  }
}

}  // namespace brigade::transport
