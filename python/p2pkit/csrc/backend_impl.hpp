// What backend.cpp and ops.cpp share: the error of a failed p2pkit call
// and run(), the path of every call.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "backend.hpp"

namespace p2pkit_torch {

// Raises DistBackendError: "p2pkit: CALL: group ...: STATUS: the library's sentence".
[[noreturn]] void fail_status(const Group& g, const char* call, p2pkit_status_t st);

// One call, as ProcessGroupNCCL runs one: the communicator made on the
// group's first call; under graph capture on the capturing stream itself,
// nothing recorded; a synchronous collective (async_op=False) on the
// caller's current stream, no Work returned (torch's Python then has
// nothing to wait for); an asynchronous one, and every send and receive, on
// the group's stream of its lane after the caller's stream, its Work
// returned. One query of the capture status per call, nothing allocated
// but the Work and, when the pool is empty, an event; `launch(stream)`
// makes the p2pkit calls with the group's lock held.
template <typename F>
c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::run(Call& call, F&& launch) {
  if (!made_.load(std::memory_order_acquire)) ensure_comm(call.device, call.name);
  std::unique_lock<std::mutex> lock(g_->mu);
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
  const bool off = !capturing && (call.async || p2p);
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

// Checks and helpers of the operations (ops.cpp, ops_move.cpp).
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

inline void same(const char* call, const at::Tensor& a, const at::Tensor& b) {
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
