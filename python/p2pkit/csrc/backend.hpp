/* SPDX-License-Identifier: BSD-3-Clause */
// The torch.distributed backend "p2pkit": a c10d::Backend over p2pkit's C
// API with ProcessGroupNCCL's behaviour (docs/pytorch.md). One group, one
// GPU, one p2pkit communicator, made from a unique id passed through the
// group's store at its first CUDA call (or at init with device_id=, or by
// p2pkit_comm_split for split_group).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "group.hpp"

namespace p2pkit_torch {

class ProcessGroupP2PKit : public c10d::Backend {
 public:
  // pg_options: the group's timeout= (torch fills it), the grid cap of the
  // group's collective kernels (p2pkit_config_t.max_blocks; -1:
  // P2PKIT_MAX_BLOCKS) and high-priority streams, as ProcessGroupNCCL's.
  struct Options : c10d::Backend::Options {
    explicit Options(std::chrono::milliseconds timeout = kBackendDefaultTimeout)
        : c10d::Backend::Options("p2pkit", timeout) {}
    Options(const Options&) = default;
    int max_blocks = -1;
    bool is_high_priority_stream = false;
  };

  ProcessGroupP2PKit(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                     c10::intrusive_ptr<Options> options);
  // The creator torch calls for each group. global_ranks: the group's
  // ranks in the default group, empty for the default group itself.
  static c10::intrusive_ptr<ProcessGroupP2PKit> create(c10::intrusive_ptr<c10d::Store> store,
                                                       int rank, int size,
                                                       c10::intrusive_ptr<Options> options,
                                                       const std::vector<int64_t>& global_ranks);
  ~ProcessGroupP2PKit() override;

  const std::string getBackendName() const override { return "p2pkit"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  c10d::ErrorType getError() override;
  void eagerConnectSingleDevice(at::Device device) override;
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts)
      override;
  void abort() override;
  void shutdown() override;
  void waitForPendingWorks() override;
  void enableCollectivesTiming() override {}

  // Python only. new_group's non-members: nothing (see split's note).
  void performNocolorSplit(at::Device device);
  int64_t commSplitCount() const { return split_count_; }
  // The communicator's asynchronous error now, as a line ("" none; tests).
  std::string asyncError();
  // The group's GPU, -1 before its communicator.
  int device() const { return g_->device; }
  c10::intrusive_ptr<Options> options() const { return options_; }

  // One call as the ops describe it to run(); the tensors are the
  // caller's (kept alive by the Work only when the call runs off the
  // caller's stream).
  struct Call {
    const char* name;
    c10d::OpType type;
    Lane lane;
    bool async;  // the caller's asyncOp: on the group's stream, a Work returned
    at::Device device;
    c10::ArrayRef<at::Tensor> outs, ins;
    std::chrono::milliseconds timeout{-1};  // the call's own timeout= (-1: the group's)
  };

 private:
  template <typename F>
  c10::intrusive_ptr<c10d::Work> run(Call& call, F&& launch);
  cudaStream_t lane_stream(Lane lane);
  void order_after(Lane lane, cudaStream_t s, cudaStream_t cur);
  c10::intrusive_ptr<Work> finish(Call& call, Lane lane, cudaStream_t s, cudaStream_t cur,
                                  bool capturing);
  void ensure_comm(at::Device device, const char* call);
  void adopt(p2pkit_comm_t comm, int device);
  p2pkit_config_t config(std::chrono::milliseconds timeout, int max_blocks) const;
  void split_from_world(const std::vector<int64_t>& global_ranks);
  c10::intrusive_ptr<Work> defer(const char* name, c10d::OpType type);
  p2pkit_comm_t comm() const { return g_->comm; }

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<Options> options_;
  c10::intrusive_ptr<Group> g_;
  std::mutex init_mu_;            // one thread makes the communicator
  std::atomic<bool> made_{false}; // ... and then it exists (or existed)
  uint64_t seq_coll_ = 0, seq_p2p_ = 0;
  int64_t split_count_ = 0;
  // startCoalescing..endCoalescing: sends and receives wait here and go
  // as one group of p2pkit calls.
  bool coalescing_ = false;
  struct Deferred {
    bool send;
    at::Tensor t;
    int peer;
    c10::intrusive_ptr<Work> work;
  };
  std::vector<Deferred> deferred_;
  at::Tensor barrier_tensor_;
};

// ------------------------------------------- shared by backend.cpp and ops --
// Raises DistBackendError: "p2pkit: CALL: group ...: STATUS: the library's sentence".
[[noreturn]] void fail_status(const Group& g, const char* call, p2pkit_status_t st);
// A group's timeout from the one torch hands it (torch's default: nobody
// chose one; backend.cpp).
std::chrono::milliseconds group_timeout(std::chrono::milliseconds given);

// One call, as ProcessGroupNCCL runs one: the communicator made on the
// group's first call; under graph capture on the capturing stream itself,
// nothing recorded; a synchronous collective (async_op=False) on the
// caller's current stream, no Work returned (torch's Python then has
// nothing to wait for); an asynchronous one, and every send and receive, on
// the group's stream of its lane after the caller's stream, its Work
// returned (P2PKIT_TORCH_SAME_STREAM=1: those too on the caller's stream).
// One query of the capture status per call, nothing allocated
// but the Work and, when the pool is empty, an event; the calls the
// watchdog found finished with tensors are let go here, after the lock;
// `launch(stream)` makes the p2pkit calls with the group's lock held.
template <typename F>
c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::run(Call& call, F&& launch) {
  if (!made_.load(std::memory_order_acquire)) ensure_comm(call.device, call.name);
  std::vector<c10::intrusive_ptr<Work>> done;  // the watchdog's retired calls: let go after mu
  std::unique_lock<std::mutex> lock(g_->mu);
  if (!g_->retired.empty()) g_->take_done(&done, false);
  g_->check_usable(call.name);
  TORCH_CHECK_VALUE(call.device.index() == g_->device, "p2pkit: ", call.name, ": ", g_->desc,
                    ": the tensor is on ", call.device, ", but the group's communicator is on "
                    "cuda:", g_->device, " (one GPU per rank and group)");
  const auto dev = static_cast<c10::DeviceIndex>(g_->device);
  const cudaStream_t cur = c10::cuda::getCurrentCUDAStream(dev).stream();
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(cur, &cs));
  const bool capturing = cs != cudaStreamCaptureStatusNone;
  const bool p2p = call.lane != kColl;
  const bool off = !capturing && !g_->same_stream && (call.async || p2p);
  const Lane lane = off ? call.lane : kCurrent;
  const cudaStream_t s = off ? lane_stream(call.lane) : cur;
  if (!capturing) order_after(lane, s, cur);
  const p2pkit_status_t st = launch(s);
  if (st != P2PKIT_SUCCESS) fail_status(*g_, call.name, st);
  auto w = finish(call, lane, s, cur, capturing);
  lock.unlock();
  if (call.async || p2p || c10d::allow_inflight_collective_as_graph_input()) return w;
  return nullptr;
}

// Checks and helpers of the operations (ops.cpp).
namespace ops {

inline const at::Tensor& one(const std::vector<at::Tensor>& ts, const char* call) {
  TORCH_CHECK_VALUE(ts.size() == 1, "p2pkit: ", call, ": takes one tensor per call, got ",
                    ts.size(), " (one GPU per rank and group)");
  return ts[0];
}

inline at::Device on_cuda(const char* call, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.is_cuda(), "p2pkit: ", call, ": the tensor is on ", t.device(), "; this "
                    "backend carries CUDA tensors (CPU tensors: init_process_group("
                    "\"cpu:gloo,cuda:p2pkit\"))");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "p2pkit: ", call, ": ", t.layout(),
                    " tensors are not supported");
  return t.device();
}

inline void dense(const char* call, const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.is_contiguous(), "p2pkit: ", call, ": the ", what, " tensor is not "
                    "contiguous (call .contiguous() first)");
}

// Two tensors of one call on one device (run() holds the call's first to
// the group's GPU; p2pkit would take another's pointer as this GPU's).
inline void same_device(const char* call, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK_VALUE(a.device() == b.device(), "p2pkit: ", call, ": the tensors are on ", a.device(),
                    " and ", b.device(), " (one GPU per rank and group)");
}

// ... and of one type.
inline void same(const char* call, const at::Tensor& a, const at::Tensor& b) {
  same_device(call, a, b);
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), "p2pkit: ", call, ": the tensors' types "
                   "differ (", a.scalar_type(), " and ", b.scalar_type(), ")");
}

inline size_t bytes(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

// Torch work on `s` (a copy, a scale, a temporary): s current while it lasts.
struct OnStream {
  OnStream(cudaStream_t s, const at::Tensor& t)
      : guard(c10::cuda::getStreamFromExternal(s, t.device().index())) {}
  c10::cuda::CUDAStreamGuard guard;
};

// The p2pkit calls of one torch call as one p2pkit group, ended even when
// a call fails or raises.
struct GroupScope {
  GroupScope() : open(p2pkit_group_start() == P2PKIT_SUCCESS) {}
  ~GroupScope() {
    if (open) p2pkit_group_end();
  }
  GroupScope(const GroupScope&) = delete;
  GroupScope& operator=(const GroupScope&) = delete;
  p2pkit_status_t end(p2pkit_status_t st) {
    if (!open) return P2PKIT_ERR_INTERNAL;
    open = false;
    const p2pkit_status_t e = p2pkit_group_end();
    return st != P2PKIT_SUCCESS ? st : e;
  }
  bool open;
};

}  // namespace ops

}  // namespace p2pkit_torch
