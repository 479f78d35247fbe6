/* SPDX-License-Identifier: BSD-3-Clause */
// The state one torch.distributed group shares with its Work objects and
// the watchdog: the p2pkit communicator of its GPU, its streams, a pool of
// CUDA events, the calls in flight and the first error. A Work may outlive
// its backend (the caller holds it), so the state is reference counted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>
#include <c10/util/intrusive_ptr.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "p2pkit.h"

namespace p2pkit_torch {

using Clock = std::chrono::steady_clock;

// Where a call runs: the caller's current stream, or one of the group's
// own: collectives (and a coalesced batch of sends and receives), sends,
// receives. Sends and receives each have a stream so that an isend and an
// irecv between two ranks never wait for each other.
enum Lane { kCurrent = 0, kColl = 1, kSend = 2, kRecv = 3, kLanes = 4 };

// What the watchdog does on an asynchronous error or a timeout
// (P2PKIT_TORCH_ASYNC_ERROR_HANDLING, TORCH_NCCL_ASYNC_ERROR_HANDLING's
// numbers).
enum Handling { kRecord = 0, kAbortExit = 1, kAbort = 2, kExit = 3 };

enum class State { kOpen, kAborted, kShutDown };

class Work;

struct Group : c10::intrusive_ptr_target {
  Group(int rank, int size, std::string desc, std::chrono::milliseconds timeout, int handling);
  ~Group() override;

  // Everything below but the atomics is guarded by mu: the caller's calls
  // hold it while they enqueue, the watchdog while it reads the
  // communicator's error or aborts it.
  std::mutex mu;
  const int rank, size;
  std::string desc;                  // "group 'name' rank r of n", for messages
  std::chrono::milliseconds timeout; // the group's timeout= (calls and the communicator)
  const int handling;                // Handling
  p2pkit_comm_t comm = nullptr;
  int device = -1;
  State state = State::kOpen;
  std::string error;                 // the first error the watchdog found ("" none)
  c10d::ErrorType error_type = c10d::ErrorType::SUCCESS;
  cudaStream_t streams[kLanes] = {};  // kColl.. made on first use
  bool high_priority = false;
  bool same_stream = false;          // P2PKIT_TORCH_SAME_STREAM: every call on the caller's stream
  cudaEvent_t ready = nullptr;       // records the current stream for a lane to wait on
  std::mutex pool_mu;                // the pool's own lock (a Work gives its event back
                                     // from any thread, some holding mu)
  std::vector<cudaEvent_t> pool;     // end events free for reuse
  // Calls in flight, oldest first, per lane (each lane completes in
  // order); the watchdog moves them to `watched`, which only it touches.
  std::deque<c10::intrusive_ptr<Work>> inflight[kLanes];
  std::mutex watch_mu;  // taken before mu, by whoever sweeps
  std::deque<c10::intrusive_ptr<Work>> watched[kLanes];
  // What the watchdog's sweep found (finished calls, a failure) while a
  // caller held mu, kept for its next sweep (watch_mu held): the watchdog
  // never waits for mu, which a caller holds across its p2pkit calls, so
  // one group's blocked call does not stop the sweeps of the others.
  std::vector<c10::intrusive_ptr<Work>> unsettled;
  std::string unsettled_why;
  c10d::ErrorType unsettled_type = c10d::ErrorType::COMM_ERROR;
  bool unsettled_reported = false;
  // The last call of each lane and its stream: a call on another stream
  // waits for the ones it must follow (calls of one communicator never
  // overlap on the GPU, but a send and a receive). The watchdog drops it
  // once its lane has nothing in flight.
  c10::intrusive_ptr<Work> last[kLanes];
  cudaStream_t last_stream[kLanes] = {};
  // Finished calls that hold tensors, let go by the caller's thread (its
  // next call, waitForPendingWorks, shutdown, the backend's end), never by
  // the watchdog's: a tensor let go can take the GIL (its Python object, an
  // autograd graph with Python in it), as ProcessGroupNCCL's watchdog
  // leaves its tensors to the caller's thread too. take_done moves them out.
  std::vector<c10::intrusive_ptr<Work>> retired;
  std::atomic<bool> closed{false};  // the backend is gone: unwatch once idle

  // (mu held) `retired` into *out, for the caller to let go after mu;
  // `all`: each lane's last call too (the group takes no more calls).
  void take_done(std::vector<c10::intrusive_ptr<Work>>* out, bool all);

  cudaEvent_t take_event();
  void give_event(cudaEvent_t e);
  // Raises (DistBackendError) when the group cannot take a call: aborted,
  // shut down, or failed (the watchdog's error).
  void check_usable(const char* call) const;
  // The group's error as one line for `call`.
  std::string failure(const char* call) const;
};

// One call's Work: an end event on the stream the call ran on (none under
// graph capture, where the graph orders everything), the tensors it reads
// and writes while they are in use off the caller's stream, its outputs.
class Work : public c10d::Work {
 public:
  Work(c10::intrusive_ptr<Group> g, c10d::OpType type, const char* name, uint64_t seq,
       const char* profiling_title);
  ~Work() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  // ProcessGroupNCCL's: torch's own waits on the host in wait(), which for
  // a CUDA call only orders the current stream, then lets the stream go.
  void blockCurrentStream() override { synchronize(); }
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return seq_; }

  // Filled by the group as it issues the call.
  c10::intrusive_ptr<Group> g_;
  const char* name_;
  const uint64_t seq_;
  cudaEvent_t end_ = nullptr;
  cudaStream_t stream_ = nullptr;  // where end_ is recorded
  Clock::time_point t0_;
  std::chrono::milliseconds timeout_{-1};  // the call's own (-1: the group's)
  c10::SmallVector<at::Tensor, 2> keep_;  // outputs first: keep_[0, nout_)
  size_t nout_ = 0;
  bool blocking_ = false;                 // barrier: wait() waits on the host too
  c10::intrusive_ptr<Work> batch_;        // a send/recv of a coalesced batch: its Work
  bool deferred_ = false;                 // ... not issued yet (the batch is open)

 private:
  bool done_on_device();
  void raise_if_failed(const char* where) const;
  std::once_flag future_once_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The watchdog: one thread for the process, started with the first group,
// sweeping every group every 100 ms (ProcessGroupNCCL's interval): calls
// completed are let go (their events; their tensors through `retired`),
// the oldest incomplete call of each lane is held to its timeout, the
// communicator's asynchronous error is read; a failure is handled as the
// group's `handling` says.
void watch(const c10::intrusive_ptr<Group>& g);
// One sweep of `g` now (waitForPendingWorks); `wait`: for the group's locks,
// else (the watchdog) none is waited for, and false says the sweep was
// cut short by a lock a caller held (what it found waits in `unsettled`).
bool sweep(Group& g, bool wait);

}  // namespace p2pkit_torch
