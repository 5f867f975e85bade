// The NCCL all-to-all of variable-sized row groups, on every visible device (one device
// exchanges with itself), through both ways of making communicators.
#include <catch2/catch.hpp>
#include <thread>

#include "gpu/cuda/nccl_comm.hpp"
#include "tests/gpu/cuda_test_support.hpp"

using namespace brigade;
using namespace brigade::gpu;
using namespace brigade::gpu::cuda;
using namespace brigade::gpu::test;

namespace {

constexpr int cols = 5;

// Rows rank `from` sends to rank `to`: varied, zero for some pairs of different ranks, and
// never zero from a rank to itself, so that one device alone still moves data through NCCL.
int rows_between(int from, int to) {
  return (from * 3 + to * 2) % 4 + (from == to ? 1 : 0);
}

// Row i from `from` to `to` holds from * 1000 + to * 100 + i + col / 10 in column col.
float cell(int from, int to, int i, int col) {
  return static_cast<float>(from * 1000 + to * 100 + i) + static_cast<float>(col) / 10.0f;
}

// One rank's buffers and exchange description.
struct rank_data {
  activation send, recv;
  row_exchange x;
};

rank_data prepare(backend& dev, int rank, int ranks) {
  rank_data d;
  std::vector<float> host;
  int recv_total = 0;
  for (int p = 0; p < ranks; ++p) {
    d.x.send_rows.push_back(rows_between(rank, p));
    d.x.recv_rows.push_back(rows_between(p, rank));
    recv_total += rows_between(p, rank);
    for (int i = 0; i < rows_between(rank, p); ++i) {
      for (int c = 0; c < cols; ++c)
        host.push_back(cell(rank, p, i, c));
    }
  }
  const int send_total = static_cast<int>(host.size()) / cols;
  d.send = to_device(dev, host, send_total, cols);
  d.recv = dev.alloc(std::max(recv_total, 1), cols);
  d.x.send = d.send.view().data;
  d.x.recv = d.recv.view().data;
  d.x.cols = cols;
  return d;
}

void require_received(backend& dev, const rank_data& d, int rank, int ranks) {
  int total = 0;
  for (int p = 0; p < ranks; ++p)
    total += rows_between(p, rank);
  if (total == 0) return;
  const std::vector<float> got = to_host(dev, d.recv.first(total));
  size_t at = 0;
  for (int p = 0; p < ranks; ++p) {
    for (int i = 0; i < rows_between(p, rank); ++i) {
      for (int c = 0; c < cols; ++c, ++at) {
        INFO("rank " << rank << " row " << i << " from rank " << p << " column " << c);
        REQUIRE(got[at] == cell(p, rank, i, c));
      }
    }
  }
}

}  // namespace

TEST_CASE("nccl communicators need CUDA backends", "[cuda][nccl]") {
  auto cpu = make_cpu_backend();
  auto comms = nccl_comm::init_local({cpu.get()});
  REQUIRE_FALSE(comms.ok());
  CHECK(comms.err().code == errc::invalid_argument);
}

TEST_CASE("nccl all-to-all moves row groups between every local device", "[cuda][nccl]") {
  auto devs = all_cuda_or_skip();
  if (devs.empty()) return;
  const int ranks = static_cast<int>(devs.size());
  std::vector<backend*> raw;
  for (auto& d : devs)
    raw.push_back(d.get());
  auto comms = nccl_comm::init_local(raw);
  INFO(ranks << " devices");
  REQUIRE(comms.ok());
  std::vector<rank_data> data;
  std::vector<nccl_comm*> cs;
  std::vector<row_exchange> xs;
  for (int r = 0; r < ranks; ++r) {
    data.push_back(prepare(*devs[static_cast<size_t>(r)], r, ranks));
    cs.push_back(comms.value()[static_cast<size_t>(r)].get());
    xs.push_back(data.back().x);
  }
  const status done = nccl_comm::all_to_all_local(cs, xs);
  INFO((done.ok() ? std::string("ok") : done.err().describe()));
  REQUIRE(done.ok());
  for (int r = 0; r < ranks; ++r) {
    devs[static_cast<size_t>(r)]->synchronize();
    require_received(*devs[static_cast<size_t>(r)], data[static_cast<size_t>(r)], r, ranks);
  }

  // Counts that do not pair up are refused before anything is queued.
  xs[0].recv_rows[0] += 1;
  const status refused = nccl_comm::all_to_all_local(cs, xs);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::invalid_argument);
}

TEST_CASE("nccl ranks joined by a unique id exchange rows, one thread per device", "[cuda][nccl]") {
  auto devs = all_cuda_or_skip();
  if (devs.empty()) return;
  const int ranks = static_cast<int>(devs.size());
  auto id = nccl_comm::make_unique_id();
  REQUIRE(id.ok());
  REQUIRE(id.value().size() == nccl_comm::unique_id_bytes);
  std::vector<rank_data> data;
  for (int r = 0; r < ranks; ++r)
    data.push_back(prepare(*devs[static_cast<size_t>(r)], r, ranks));
  // Each thread records its outcome; Catch2 assertions stay on the main thread.
  std::vector<std::string> failures(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      backend& dev = *devs[static_cast<size_t>(r)];
      auto comm = nccl_comm::init_rank(id.value(), ranks, r, dev);
      if (!comm.ok()) {
        failures[static_cast<size_t>(r)] = comm.err().describe();
        return;
      }
      const status s = comm.value()->all_to_all(data[static_cast<size_t>(r)].x);
      if (!s.ok()) failures[static_cast<size_t>(r)] = s.err().describe();
      dev.synchronize();
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < ranks; ++r) {
    INFO("rank " << r << ": " << failures[static_cast<size_t>(r)]);
    REQUIRE(failures[static_cast<size_t>(r)].empty());
    require_received(*devs[static_cast<size_t>(r)], data[static_cast<size_t>(r)], r, ranks);
  }
}
