#include "tests/gpu/warp_emulator.hpp"

#include <ucontext.h>

#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace brigade::gpu::test::emulator {
namespace {

constexpr int lanes = 32;
constexpr size_t lane_stack_bytes = 256 * 1024;

// The warp being run: one fiber per lane and the slots lanes exchange values through.
struct warp_state {
  ucontext_t scheduler;
  std::array<ucontext_t, lanes> context;
  std::array<bool, lanes> done{};
  std::array<bool, lanes> waiting{};
  std::array<std::array<unsigned char, 8>, lanes> slot{};
  const std::function<void()>* body = nullptr;
  int running = -1;
  // Set inside a fiber, thrown by the scheduler: exceptions must not cross fiber boundaries.
  std::string error;
};

warp_state* current = nullptr;

// Lane stacks, allocated once and reused by every warp.
unsigned char* lane_stack(int lane) {
  static std::vector<std::unique_ptr<unsigned char[]>> stacks;
  if (stacks.empty()) {
    for (int i = 0; i < lanes; ++i)
      stacks.emplace_back(new unsigned char[lane_stack_bytes]);
  }
  return stacks[static_cast<size_t>(lane)].get();
}

void lane_entry() {
  (*current->body)();
  current->done[static_cast<size_t>(current->running)] = true;
  // Returning resumes uc_link, the scheduler.
}

// Resumes every lane that is not done until it waits or finishes; returns how many wait.
int run_pass(warp_state& w, unsigned first_thread) {
  int waiting = 0;
  for (int lane = 0; lane < lanes; ++lane) {
    const auto l = static_cast<size_t>(lane);
    if (w.done[l]) continue;
    w.waiting[l] = false;
    w.running = lane;
    threadIdx = dim3(first_thread + static_cast<unsigned>(lane));
    swapcontext(&w.scheduler, &w.context[l]);
    if (w.waiting[l]) ++waiting;
  }
  return waiting;
}

void start_lanes(warp_state& w, int live) {
  for (int lane = 0; lane < lanes; ++lane) {
    const auto l = static_cast<size_t>(lane);
    w.done[l] = lane >= live;
    getcontext(&w.context[l]);
    w.context[l].uc_stack.ss_sp = lane_stack(lane);
    w.context[l].uc_stack.ss_size = lane_stack_bytes;
    w.context[l].uc_link = &w.scheduler;
    makecontext(&w.context[l], lane_entry, 0);
  }
}

void run_warp(unsigned first_thread, int live, const std::function<void()>& body) {
  warp_state w;
  w.body = &body;
  start_lanes(w, live);
  warp_state* outer = current;
  current = &w;
  for (;;) {
    const int waiting = run_pass(w, first_thread);
    // Warp primitives use the full mask: every lane the warp started with must reach each one.
    if (waiting > 0 && waiting != live && w.error.empty()) {
      w.error = "warp emulator: " + std::to_string(waiting) + " of " + std::to_string(live) +
                " lanes reached a warp primitive";
    }
    if (waiting == 0 || !w.error.empty()) break;
  }
  current = outer;
  if (!w.error.empty()) throw std::logic_error(w.error);
}

}  // namespace

void warp_barrier() {
  warp_state& w = *current;
  const auto l = static_cast<size_t>(w.running);
  w.waiting[l] = true;
  swapcontext(&w.context[l], &w.scheduler);
}

void exchange(void* value, size_t bytes, int source) {
  warp_state& w = *current;
  if (bytes > 8 || source < 0 || source >= lanes) {
    w.error = "warp emulator: shuffle of " + std::to_string(bytes) + " bytes from lane " +
              std::to_string(source);
    source = 0;
    bytes = std::min<size_t>(bytes, 8);
  }
  std::memcpy(w.slot[static_cast<size_t>(w.running)].data(), value, bytes);
  warp_barrier();
  std::memcpy(value, w.slot[static_cast<size_t>(source)].data(), bytes);
  warp_barrier();
}

void run_grid(dim3 grid, dim3 block, const std::function<void()>& body) {
  if (block.y != 1 || block.z != 1 || grid.z != 1) {
    throw std::logic_error("warp emulator: only 1-D blocks and 2-D grids are supported");
  }
  blockDim = block;
  gridDim = grid;
  for (unsigned by = 0; by < grid.y; ++by) {
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      blockIdx = dim3(bx, by);
      for (unsigned first = 0; first < block.x; first += lanes) {
        const int live = static_cast<int>(std::min<unsigned>(lanes, block.x - first));
        run_warp(first, live, body);
      }
    }
  }
}

}  // namespace brigade::gpu::test::emulator
