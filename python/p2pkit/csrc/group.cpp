/* SPDX-License-Identifier: BSD-3-Clause */
// A group's shared state, its Work objects and the watchdog (group.hpp).
#include "group.hpp"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <ATen/core/jit_type.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

namespace p2pkit_torch {

// ------------------------------------------------------------------ Group --

Group::Group(int rank_, int size_, std::string desc_, std::chrono::milliseconds timeout_,
             int handling_)
    : rank(rank_), size(size_), desc(std::move(desc_)), timeout(timeout_), handling(handling_) {}

Group::~Group() {
  // The communicator is destroyed (shutdown) or aborted before this; what
  // is left are CUDA objects of its GPU, and only when CUDA still runs.
  if (device < 0) return;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  for (cudaEvent_t e : pool) cudaEventDestroy(e);
  if (ready) cudaEventDestroy(ready);
  for (int l = kColl; l < kLanes; l++)
    if (streams[l]) cudaStreamDestroy(streams[l]);
}

cudaEvent_t Group::take_event() {
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    if (!pool.empty()) {
      cudaEvent_t e = pool.back();
      pool.pop_back();
      return e;
    }
  }
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  cudaEvent_t e = nullptr;
  C10_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void Group::give_event(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(pool_mu);
  pool.push_back(e);
}

std::string Group::failure(const char* call) const {
  const char* how = state == State::kAborted    ? "was aborted"
                    : state == State::kShutDown ? "was shut down"
                                                : "failed";
  std::string s = c10::str("p2pkit: ", call, ": ", desc, " ", how);
  if (!error.empty()) s += ": " + error;
  return s;
}

void Group::take_done(std::vector<c10::intrusive_ptr<Work>>* out, bool all) {
  for (auto& w : retired) out->push_back(std::move(w));
  retired.clear();
  if (!all) return;
  for (auto& w : last)
    if (w) out->push_back(std::move(w));
}

void Group::check_usable(const char* call) const {
  if (state == State::kOpen && error.empty()) return;
  C10_THROW_ERROR(DistBackendError, failure(call));
}

// ------------------------------------------------------------------- Work --

Work::Work(c10::intrusive_ptr<Group> g, c10d::OpType type, const char* name, uint64_t seq,
           const char* profiling_title)
    : c10d::Work(g->rank, type, profiling_title), g_(std::move(g)), name_(name), seq_(seq),
      t0_(Clock::now()) {}

Work::~Work() {
  if (end_) g_->give_event(end_);
}

// The end event has been reached (none: nothing to wait for).
bool Work::done_on_device() {
  if (deferred_) return false;
  if (batch_) return batch_->done_on_device();
  if (!end_) return true;
  const cudaError_t e = cudaEventQuery(end_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  C10_CUDA_CHECK(e);
  return true;
}

void Work::raise_if_failed(const char* where) const {
  std::lock_guard<std::mutex> lock(g_->mu);
  if (g_->error.empty() && g_->state != State::kAborted) return;
  C10_THROW_ERROR(DistBackendError, g_->failure(c10::str(name_, " (", where, ")").c_str()));
}

bool Work::isCompleted() {
  bool failed;
  {
    std::lock_guard<std::mutex> lock(g_->mu);
    failed = !g_->error.empty() || g_->state == State::kAborted;
  }
  return failed || done_on_device();
}

bool Work::isSuccess() const {
  std::lock_guard<std::mutex> lock(g_->mu);
  return g_->error.empty() && g_->state != State::kAborted;
}

std::exception_ptr Work::exception() const {
  try {
    raise_if_failed("exception()");
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

std::vector<at::Tensor> Work::result() {
  return std::vector<at::Tensor>(keep_.begin(), keep_.begin() + static_cast<long>(nout_));
}

// The current stream waits for the call (ProcessGroupNCCL's
// synchronizeStream); a barrier's waits on the host too.
void Work::synchronize() {
  raise_if_failed("synchronize()");
  if (deferred_)
    TORCH_CHECK(false, "p2pkit: ", name_, ": waited for inside its coalescing block; wait for "
                "the Work the block's end returns (batch_isend_irecv's)");
  if (batch_) return batch_->synchronize();
  if (!end_) return;
  const auto cur = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(g_->device));
  if (cur.stream() != stream_) C10_CUDA_CHECK(cudaStreamWaitEvent(cur.stream(), end_, 0));
  if (blocking_) C10_CUDA_CHECK(cudaEventSynchronize(end_));
}

// timeout > 0: wait on the host until the call is done, at most that long
// (ProcessGroupNCCL's blocking wait), then as without.
bool Work::wait(std::chrono::milliseconds timeout) {
  if (timeout > std::chrono::milliseconds(0)) {
    const auto until = Clock::now() + timeout;
    while (!isCompleted()) {
      if (Clock::now() > until)
        C10_THROW_ERROR(DistBackendError, c10::str("p2pkit: ", name_, " (", g_->desc, ", call ",
                                                   seq_, "): not done after work.wait(timeout=",
                                                   timeout.count(), " ms)"));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  synchronize();
  return true;
}

// A Future completed on the call's stream: what follows it on any stream
// waits for the call, as ProcessGroupNCCL's. Under graph capture (no end
// event) it holds no CUDA events. Made once, on the first call from any
// thread (torch may ask from the caller's and a hook's at once).
c10::intrusive_ptr<c10::ivalue::Future> Work::getFuture() {
  std::call_once(future_once_, [this] {
    auto type = c10::ListType::create(c10::TensorType::get());
    if (!end_ && !batch_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(type);
      future_->markCompleted(c10::IValue(result()));
      return;
    }
    const auto dev = static_cast<c10::DeviceIndex>(g_->device);
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        type, std::vector<c10::Device>{c10::Device(c10::kCUDA, dev)});
    const cudaStream_t s = batch_ ? batch_->stream_ : stream_;
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(s, dev));
    future_->markCompleted(c10::IValue(result()));
  });
  return future_;
}

// --------------------------------------------------------------- watchdog --

namespace {

class Watchdog {
 public:
  static Watchdog& get() {
    // Never destroyed (a static destructor could run while the thread is
    // inside CUDA); the thread itself is stopped and joined at exit.
    static Watchdog* w = new Watchdog();
    return *w;
  }

  void add(const c10::intrusive_ptr<Group>& g) {
    std::lock_guard<std::mutex> lock(mu_);
    groups_.push_back(g);
    if (thread_.joinable() || stop_) return;
    thread_ = std::thread([this] { loop(); });
    std::atexit([] { get().stop(); });
  }

 private:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; })) {
      std::vector<c10::intrusive_ptr<Group>> now = groups_;
      lock.unlock();
      for (auto& g : now) sweep(*g, false);
      now.clear();
      lock.lock();
      forget_idle();
    }
  }

  // Groups whose backend is gone and with nothing in flight (mu_ held); a
  // group whose lock a caller holds is kept for the next round.
  void forget_idle() {
    std::vector<c10::intrusive_ptr<Group>> keep;
    for (auto& g : groups_) {
      std::unique_lock<std::mutex> watching(g->watch_mu, std::try_to_lock);
      std::unique_lock<std::mutex> lock(g->mu, std::defer_lock);
      bool busy = !watching.owns_lock() || !lock.try_lock() || !g->unsettled.empty();
      for (int l = 0; l < kLanes && !busy; l++)
        busy = !g->inflight[l].empty() || !g->watched[l].empty();
      if (busy || !g->closed) keep.push_back(g);
    }
    groups_.swap(keep);
  }

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<c10::intrusive_ptr<Group>> groups_;
  std::thread thread_;
};

// Moves the finished calls of each lane to *done; "" when the oldest
// unfinished one of each is within `timeout`, else why not (*type says
// which): a call past its timeout, or an end event that reports a CUDA
// error (a sticky one: the call has not finished and the group fails, as
// ProcessGroupNCCL's watchdog raises on it).
std::string retire(Group& g, std::chrono::milliseconds timeout,
                   std::vector<c10::intrusive_ptr<Work>>* done, c10d::ErrorType* type) {
  const auto now = Clock::now();
  for (int l = 0; l < kLanes; l++) {
    auto& q = g.watched[l];
    while (!q.empty()) {
      const cudaError_t e = cudaEventQuery(q.front()->end_);
      if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        break;
      }
      if (e == cudaErrorCudartUnloading) return "";
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *type = c10d::ErrorType::COMM_ERROR;
        return c10::str(q.front()->name_, " (call ", q.front()->seq_, "): CUDA error on the "
                        "group's GPU: ", cudaGetErrorString(e));
      }
      done->push_back(std::move(q.front()));
      q.pop_front();
    }
    if (q.empty()) continue;
    const Work& w = *q.front();
    const auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.t0_);
    const bool own = w.timeout_.count() > 0;
    if (ran <= (own ? w.timeout_ : timeout)) continue;
    *type = c10d::ErrorType::TIMEOUT;
    return c10::str(w.name_, " (call ", w.seq_, ") has not finished after ", ran.count(),
                    " ms, past ", own ? "its" : "the group's", " timeout of ",
                    (own ? w.timeout_ : timeout).count(), " ms");
  }
  return "";
}

// What the group's handling says to do with `why` (mu held); `reported`:
// the failure is the communicator's own error, whose report of what each
// rank was doing the library wrote when it found it (docs/desync.md).
void handle_failure(Group& g, const std::string& why, c10d::ErrorType type, bool reported) {
  if (!g.error.empty()) return;
  g.error = why;
  g.error_type = type;
  std::fprintf(stderr, "p2pkit: watchdog: %s: %s\n", g.desc.c_str(), why.c_str());
  // The watchdog's own finding (a call past its timeout) gets that report
  // here, as ProcessGroupNCCL dumps its flight recorder; p2pkit_comm_abort
  // below writes it itself, so only the ends without an abort need it.
  const bool aborts = g.handling == kAbort || g.handling == kAbortExit;
  if (!reported && g.comm && !aborts && p2pkit_comm_dump_trace(g.comm, why.c_str()) != P2PKIT_SUCCESS)
    std::fprintf(stderr, "p2pkit: watchdog: %s: no desync report: %s\n", g.desc.c_str(),
                 p2pkit_last_error());
  if (g.handling == kExit) std::_Exit(1);
  if (g.handling == kRecord || !g.comm) return;
  p2pkit_comm_abort(g.comm);  // returns within about two seconds
  g.comm = nullptr;
  g.state = State::kAborted;
  if (g.handling == kAbortExit) std::_Exit(1);
}

// What a sweep found finished (mu held): each lane's last call once the
// lane has nothing in flight (later calls need not wait for it, and the
// group no longer holds a call that holds the group), and of those and
// the retired calls, the ones holding tensors go to `retired`. A closed
// group has no caller left to let them go: they go with `done`.
void settle(Group& g, std::vector<c10::intrusive_ptr<Work>>* done) {
  for (int l = 0; l < kLanes; l++)
    if (g.last[l] && g.inflight[l].empty() && g.watched[l].empty())
      done->push_back(std::move(g.last[l]));
  if (g.closed) return;
  for (auto& w : *done)
    if (!w->keep_.empty()) g.retired.push_back(std::move(w));
}

}  // namespace

void watch(const c10::intrusive_ptr<Group>& g) { Watchdog::get().add(g); }

bool sweep(Group& g, bool wait) {
  std::unique_lock<std::mutex> watching(g.watch_mu, std::defer_lock);
  if (wait) watching.lock();
  else if (!watching.try_lock()) return false;
  std::vector<c10::intrusive_ptr<Work>> done;  // let go last, after mu: none holds a tensor
  std::string why;
  c10d::ErrorType type = c10d::ErrorType::COMM_ERROR;
  bool reported = false;  // the communicator's own error: the library wrote its report
  std::chrono::milliseconds timeout;
  {
    std::unique_lock<std::mutex> lock(g.mu, std::defer_lock);
    if (wait) lock.lock();
    else if (!lock.try_lock()) return false;
    for (int l = 0; l < kLanes; l++) {
      for (auto& w : g.inflight[l]) g.watched[l].push_back(std::move(w));
      g.inflight[l].clear();
    }
    timeout = g.timeout;
    p2pkit_status_t st = P2PKIT_SUCCESS;
    if (g.state == State::kOpen && g.error.empty() && g.comm &&
        p2pkit_comm_get_async_error(g.comm, &st) == P2PKIT_SUCCESS && st != P2PKIT_SUCCESS) {
      why = c10::str(p2pkit_strerror(st), ": ", p2pkit_last_error());
      reported = true;
      type = st == P2PKIT_ERR_TIMEOUT  ? c10d::ErrorType::TIMEOUT
             : st == P2PKIT_ERR_REMOTE ? c10d::ErrorType::REMOTE_ERROR
                                       : c10d::ErrorType::COMM_ERROR;
    }
  }
  if (g.device >= 0) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(g.device));
    c10d::ErrorType late_type = c10d::ErrorType::TIMEOUT;
    std::string late = retire(g, timeout, &done, &late_type);
    if (why.empty() && !late.empty()) why = late, type = late_type;
  }
  // What an earlier sweep could not settle comes first (older calls, the
  // failure found first).
  done.insert(done.begin(), std::make_move_iterator(g.unsettled.begin()),
              std::make_move_iterator(g.unsettled.end()));
  g.unsettled.clear();
  if (!g.unsettled_why.empty()) {
    why = std::move(g.unsettled_why), type = g.unsettled_type, reported = g.unsettled_reported;
    g.unsettled_why.clear();
  }
  std::unique_lock<std::mutex> lock(g.mu, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    g.unsettled = std::move(done);
    g.unsettled_why = std::move(why), g.unsettled_type = type, g.unsettled_reported = reported;
    return false;
  }
  settle(g, &done);
  // A group aborted or shut down meanwhile has no failure to handle (its
  // state never returns to open).
  if (!why.empty() && g.state == State::kOpen) handle_failure(g, why, type, reported);
  return true;
}

}  // namespace p2pkit_torch
