#include "gpu/cuda/nccl_comm.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "gpu/cuda/check.hpp"
#include "gpu/cuda/cuda_backend.hpp"

namespace brigade::gpu::cuda {

struct nccl_comm::handle {
  ncclComm_t comm = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;
};

namespace {

static_assert(nccl_comm::unique_id_bytes == sizeof(ncclUniqueId), "NCCL changed its id size");

error nccl_error(ncclResult_t r, const std::string& what) {
  std::string message = "NCCL " + what + ": " + ncclGetErrorString(r);
  const char* detail = ncclGetLastError(nullptr);
  if (detail && *detail) message += " (" + std::string(detail) + ")";
  return error(errc::unavailable, message);
}

result<cuda_backend*> cuda_backend_of(backend* dev) {
  auto* cuda = dynamic_cast<cuda_backend*>(dev);
  if (!cuda) {
    return error(errc::invalid_argument,
                 "NCCL needs CUDA backends; got '" + (dev ? dev->name() : "null") + "'");
  }
  return cuda;
}

status check_counts(const row_exchange& x, int ranks) {
  const auto n = static_cast<size_t>(ranks);
  if (x.send_rows.size() != n || x.recv_rows.size() != n || x.cols <= 0) {
    return error(errc::invalid_argument,
                 "all_to_all: send_rows and recv_rows need one entry per rank (" +
                     std::to_string(ranks) + ") and cols must be positive");
  }
  long long sent = 0;
  long long received = 0;
  for (size_t p = 0; p < n; ++p) {
    if (x.send_rows[p] < 0 || x.recv_rows[p] < 0) {
      return error(errc::invalid_argument,
                   "all_to_all: negative row count for rank " + std::to_string(p));
    }
    sent += x.send_rows[p];
    received += x.recv_rows[p];
  }
  if ((sent > 0 && !x.send) || (received > 0 && !x.recv)) {
    return error(errc::invalid_argument, "all_to_all: rows to move but no buffer");
  }
  return ok_status();
}

// Whether `device` is this thread's current device (after a device_guard that may have failed).
bool is_current(int device) {
  int current = -1;
  return cudaGetDevice(&current) == cudaSuccess && current == device;
}

}  // namespace

nccl_comm::nccl_comm(std::unique_ptr<handle> h, int rank, int ranks)
    : h_(std::move(h)), rank_(rank), ranks_(ranks) {}

nccl_comm::~nccl_comm() {
  if (h_ && h_->comm) {
    device_guard guard(h_->device, false);
    cudaStreamSynchronize(h_->stream);
    ncclCommDestroy(h_->comm);
  }
}

result<std::vector<uint8_t>> nccl_comm::make_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return nccl_error(r, "ncclGetUniqueId");
  std::vector<uint8_t> bytes(sizeof id);
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

result<std::vector<std::unique_ptr<nccl_comm>>> nccl_comm::init_local(
    const std::vector<backend*>& backends) {
  std::vector<int> devices;
  std::vector<cuda_backend*> cuda;
  for (backend* b : backends) {
    auto c = cuda_backend_of(b);
    if (!c) return c.err();
    cuda.push_back(c.value());
    devices.push_back(c.value()->device());
  }
  if (devices.empty()) return error(errc::invalid_argument, "init_local: no backends");
  std::vector<ncclComm_t> comms(devices.size());
  const ncclResult_t r =
      ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data());
  if (r != ncclSuccess) return nccl_error(r, "ncclCommInitAll");
  std::vector<std::unique_ptr<nccl_comm>> out;
  const int ranks = static_cast<int>(devices.size());
  for (int i = 0; i < ranks; ++i) {
    auto h = std::make_unique<handle>();
    h->comm = comms[static_cast<size_t>(i)];
    h->device = devices[static_cast<size_t>(i)];
    h->stream = cuda[static_cast<size_t>(i)]->stream();
    out.push_back(std::unique_ptr<nccl_comm>(new nccl_comm(std::move(h), i, ranks)));
  }
  return out;
}

result<std::unique_ptr<nccl_comm>> nccl_comm::init_rank(const std::vector<uint8_t>& id, int ranks,
                                                        int rank, backend& dev) {
  if (id.size() != sizeof(ncclUniqueId)) {
    return error(errc::invalid_argument, "init_rank: the NCCL id has " + std::to_string(id.size()) +
                                             " bytes, not " + std::to_string(sizeof(ncclUniqueId)));
  }
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    return error(errc::invalid_argument, "init_rank: rank " + std::to_string(rank) + " of " +
                                             std::to_string(ranks) + " does not exist");
  }
  auto c = cuda_backend_of(&dev);
  if (!c) return c.err();
  ncclUniqueId nid;
  std::memcpy(&nid, id.data(), sizeof nid);
  auto h = std::make_unique<handle>();
  h->device = c.value()->device();
  h->stream = c.value()->stream();
  // NCCL binds the communicator to the calling thread's current device; the caller's own
  // current device is restored afterwards.
  device_guard guard(h->device, false);
  if (!is_current(h->device)) {
    return error(errc::unavailable,
                 "init_rank: cannot select CUDA device " + std::to_string(h->device));
  }
  const ncclResult_t r = ncclCommInitRank(&h->comm, ranks, nid, rank);
  if (r != ncclSuccess) return nccl_error(r, "ncclCommInitRank");
  return std::unique_ptr<nccl_comm>(new nccl_comm(std::move(h), rank, ranks));
}

status nccl_comm::enqueue(const row_exchange& x) {
  device_guard guard(h_->device, false);
  if (!is_current(h_->device)) {
    return error(errc::unavailable,
                 "all_to_all: cannot select CUDA device " + std::to_string(h_->device));
  }
  size_t send_at = 0;
  size_t recv_at = 0;
  const auto cols = static_cast<size_t>(x.cols);
  for (int p = 0; p < ranks_; ++p) {
    const auto send_count = static_cast<size_t>(x.send_rows[static_cast<size_t>(p)]) * cols;
    const auto recv_count = static_cast<size_t>(x.recv_rows[static_cast<size_t>(p)]) * cols;
    if (send_count > 0) {
      const ncclResult_t r =
          ncclSend(x.send + send_at, send_count, ncclFloat32, p, h_->comm, h_->stream);
      if (r != ncclSuccess) return nccl_error(r, "ncclSend to rank " + std::to_string(p));
    }
    if (recv_count > 0) {
      const ncclResult_t r =
          ncclRecv(x.recv + recv_at, recv_count, ncclFloat32, p, h_->comm, h_->stream);
      if (r != ncclSuccess) return nccl_error(r, "ncclRecv from rank " + std::to_string(p));
    }
    send_at += send_count;
    recv_at += recv_count;
  }
  return ok_status();
}

status nccl_comm::all_to_all(const row_exchange& x) {
  status valid = check_counts(x, ranks_);
  if (!valid) return valid;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return nccl_error(r, "ncclGroupStart");
  status queued = enqueue(x);
  // The group must be closed even when a call inside it failed.
  r = ncclGroupEnd();
  if (!queued) return queued;
  if (r != ncclSuccess) return nccl_error(r, "ncclGroupEnd");
  return ok_status();
}

status nccl_comm::all_to_all_local(const std::vector<nccl_comm*>& comms,
                                   const std::vector<row_exchange>& xs) {
  if (comms.size() != xs.size() || comms.empty()) {
    return error(errc::invalid_argument, "all_to_all_local: one exchange per communicator");
  }
  for (size_t i = 0; i < comms.size(); ++i) {
    status valid = check_counts(xs[i], comms[i]->ranks_);
    if (!valid) return valid;
  }
  // Rank r's rows for rank p must be exactly what p expects from r, or NCCL would wait forever.
  for (size_t i = 0; i < comms.size(); ++i) {
    for (size_t j = 0; j < comms.size(); ++j) {
      const auto r = static_cast<size_t>(comms[i]->rank_);
      const auto p = static_cast<size_t>(comms[j]->rank_);
      if (xs[i].send_rows[p] != xs[j].recv_rows[r]) {
        return error(errc::invalid_argument,
                     "all_to_all_local: rank " + std::to_string(r) + " sends " +
                         std::to_string(xs[i].send_rows[p]) + " rows to rank " + std::to_string(p) +
                         ", which expects " + std::to_string(xs[j].recv_rows[r]));
      }
    }
  }
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return nccl_error(r, "ncclGroupStart");
  status queued = ok_status();
  for (size_t i = 0; i < comms.size() && queued; ++i)
    queued = comms[i]->enqueue(xs[i]);
  r = ncclGroupEnd();
  if (!queued) return queued;
  if (r != ncclSuccess) return nccl_error(r, "ncclGroupEnd");
  return ok_status();
}

}  // namespace brigade::gpu::cuda
