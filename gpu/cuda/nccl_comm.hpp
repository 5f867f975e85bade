// NCCL communicators between CUDA backends, and the all-to-all that moves routed rows to the
// GPUs holding their experts and the expert outputs back (expert dispatch and combine).
//
// Plain C++: no CUDA or NCCL headers, so actor code may include it. Every operation is queued
// on the stream of the backend the communicator was made for, ordered with that backend's
// kernels; backend::synchronize() waits for it. The communicator borrows that stream: destroy
// communicators before their backends.
//
//   init_local(backends)          one process drives every local GPU (ncclCommInitAll)
//   make_unique_id() -> bytes     rank 0 makes an id, the caller sends it to the others,
//   init_rank(id, ranks, rank)    and each rank (thread or process) joins with it
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.hpp"
#include "gpu/backend.hpp"

namespace brigade::gpu::cuda {

/// One rank's part of an all-to-all of variable-sized groups of rows. Rows are dense float32
/// rows of `cols` in device memory; the group for (or from) rank p follows those of ranks < p.
struct row_exchange {
  const float* send = nullptr;  ///< Rows to send, grouped by destination rank.
  std::vector<int> send_rows;   ///< Rows for each rank; one entry per rank.
  float* recv = nullptr;        ///< Where received rows go, grouped by source rank.
  std::vector<int> recv_rows;   ///< Rows from each rank; must equal what that rank sends here.
  int cols = 0;                 ///< Floats per row.
};

class nccl_comm {
 public:
  ~nccl_comm();
  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;

  /// Bytes of an NCCL unique id.
  static constexpr size_t unique_id_bytes = 128;

  /// A new id for init_rank; the caller hands the same bytes to every rank.
  static result<std::vector<uint8_t>> make_unique_id();
  /// One communicator per backend, rank i on backends[i]; every backend must be a CUDA backend
  /// on a different device.
  static result<std::vector<std::unique_ptr<nccl_comm>>> init_local(
      const std::vector<backend*>& backends);
  /// Joins rank `rank` of `ranks`; blocks until every rank has joined.
  static result<std::unique_ptr<nccl_comm>> init_rank(const std::vector<uint8_t>& id, int ranks,
                                                      int rank, backend& dev);

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }

  /// Queues this rank's sends and receives; every rank must call it for the same exchange.
  status all_to_all(const row_exchange& x);
  /// Queues the exchanges of several local ranks from one thread: comms[i] does xs[i]. Checks
  /// that what each rank sends matches what its peer expects before queuing anything.
  static status all_to_all_local(const std::vector<nccl_comm*>& comms,
                                 const std::vector<row_exchange>& xs);

 private:
  struct handle;
  nccl_comm(std::unique_ptr<handle> h, int rank, int ranks);
  status enqueue(const row_exchange& x);

  std::unique_ptr<handle> h_;
  int rank_;
  int ranks_;
};

}  // namespace brigade::gpu::cuda
