/* SPDX-License-Identifier: BSD-3-Clause */
// The backend's machinery: making the communicator, running a call on the
// right stream in the right order, the Work it leaves (backend.hpp). The
// operations themselves are in ops.cpp.
#include "backend.hpp"

#include <algorithm>
#include <cstring>

#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>


namespace p2pkit_torch {

namespace {

constexpr const char* kUidKey = "p2pkit/unique_id";

// The default group's backend: new_group of every rank splits its
// communicator (see ProcessGroupP2PKit's constructor).
std::mutex world_mu;
c10::weak_intrusive_ptr<ProcessGroupP2PKit> world{c10::intrusive_ptr<ProcessGroupP2PKit>()};

int setting(const char* name, int* set) {
  int64_t v = 0;
  if (p2pkit_setting_int(name, &v, set) != P2PKIT_SUCCESS)
    TORCH_CHECK_VALUE(false, "p2pkit: ", p2pkit_last_error());
  return static_cast<int>(v);
}

std::string describe(const c10::intrusive_ptr<ProcessGroupP2PKit::Options>& o, int rank, int size) {
  return c10::str("group '", o->group_name.empty() ? "?" : o->group_name, "' rank ", rank, " of ",
                  size);
}

}  // namespace

void fail_status(const Group& g, const char* call, p2pkit_status_t st) {
  C10_THROW_ERROR(DistBackendError, c10::str("p2pkit: ", call, ": ", g.desc, ": ",
                                             p2pkit_strerror(st), ": ", p2pkit_last_error()));
}

ProcessGroupP2PKit::ProcessGroupP2PKit(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                       c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size), store_(std::move(store)), options_(std::move(options)) {
  g_ = c10::make_intrusive<Group>(rank, size, describe(options_, rank, size), options_->timeout,
                                  setting("P2PKIT_TORCH_ASYNC_ERROR_HANDLING", nullptr));
  g_->high_priority = options_->is_high_priority_stream;
  g_->same_stream = setting("P2PKIT_TORCH_SAME_STREAM", nullptr) != 0;
  watch(g_);
}

c10::intrusive_ptr<ProcessGroupP2PKit> ProcessGroupP2PKit::create(
    c10::intrusive_ptr<c10d::Store> store, int rank, int size, c10::intrusive_ptr<Options> options,
    const std::vector<int64_t>& global_ranks) {
  auto pg = c10::make_intrusive<ProcessGroupP2PKit>(std::move(store), rank, size, std::move(options));
  if (global_ranks.empty()) {
    std::lock_guard<std::mutex> lock(world_mu);
    world = c10::weak_intrusive_ptr<ProcessGroupP2PKit>(pg);
  } else {
    pg->split_from_world(global_ranks);
  }
  return pg;
}

// Torch calls shutdown() (destroy_process_group) or abort() first; a group
// dropped without either keeps its communicator until the process ends
// (p2pkit_comm_destroy waits for every rank, which a destructor cannot ask).
// What the group kept of finished calls goes here, on the caller's thread.
ProcessGroupP2PKit::~ProcessGroupP2PKit() {
  std::vector<c10::intrusive_ptr<Work>> done;
  std::lock_guard<std::mutex> lock(g_->mu);
  g_->closed = true;
  g_->take_done(&done, true);
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupP2PKit::getBackendOptions() {
  return c10::make_intrusive<Options>(*options_);  // a copy: split_group edits it
}

std::chrono::milliseconds group_timeout(std::chrono::milliseconds given) {
  // Torch hands every group a timeout; its 30-minute default for a backend
  // other than NCCL (kBackendDefaultTimeout) means nobody chose one, and
  // then the group waits as ProcessGroupNCCL would: P2PKIT_TIMEOUT, else its
  // 600 s (PyTorch's 10 minutes for NCCL). A timeout= the caller chose wins.
  if (given != ::kBackendDefaultTimeout) return given;
  return std::chrono::seconds(setting("P2PKIT_TIMEOUT", nullptr));
}

p2pkit_config_t ProcessGroupP2PKit::config(std::chrono::milliseconds timeout, int max_blocks) const {
  p2pkit_config_t cfg = P2PKIT_CONFIG_INIT;
  const int64_t s = (timeout.count() + 999) / 1000;
  TORCH_CHECK_VALUE(s >= 1 && s <= 86400, "p2pkit: ", g_->desc, ": timeout of ", timeout.count(),
                    " ms: p2pkit's communicators wait from 1 s to 86400 s (24 hours)");
  cfg.timeout_s = static_cast<int>(s);
  cfg.max_blocks = max_blocks;
  return cfg;
}

void ProcessGroupP2PKit::adopt(p2pkit_comm_t comm, int device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  cudaEvent_t ready = nullptr;
  C10_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  std::lock_guard<std::mutex> lock(g_->mu);
  g_->comm = comm;
  g_->device = device;
  g_->ready = ready;
  made_ = true;
}

// The communicator of `device`, made on the group's first CUDA call:
// rank 0 makes a unique id and puts it in the group's store, the others
// take it from there (collective over the group's ranks).
void ProcessGroupP2PKit::ensure_comm(at::Device device, const char* call) {
  std::lock_guard<std::mutex> making(init_mu_);
  {
    std::lock_guard<std::mutex> lock(g_->mu);
    g_->check_usable(call);
    if (g_->comm) return;
  }
  const int idx = device.has_index() ? device.index() : c10::cuda::current_device();
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(idx));
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream().stream(), &cs));
  TORCH_CHECK(cs == cudaStreamCaptureStatusNone, "p2pkit: ", call, ": ", g_->desc, ": its "
              "communicator is made at the group's first CUDA call, which may not be under graph "
              "capture: make one call before capturing (as with NCCL)");
  p2pkit_unique_id_t id;
  if (getRank() == 0) {
    const p2pkit_status_t st = p2pkit_get_unique_id(&id);
    if (st != P2PKIT_SUCCESS) fail_status(*g_, c10::str(call, " (making a unique id)").c_str(), st);
    store_->set(kUidKey, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
  } else {
    const std::vector<uint8_t> got = store_->get(kUidKey);
    TORCH_CHECK(got.size() == sizeof id.internal, "p2pkit: ", call, ": ", g_->desc, ": the "
                "unique id in the store has ", got.size(), " bytes, not ", sizeof id.internal);
    std::memcpy(id.internal, got.data(), sizeof id.internal);
  }
  p2pkit_config_t cfg = config(g_->timeout, options_->max_blocks);
  cfg.device = idx;
  p2pkit_comm_t comm = nullptr;
  const p2pkit_status_t st = p2pkit_comm_init_rank_config(&comm, getSize(), &id, getRank(), &cfg);
  if (st != P2PKIT_SUCCESS) fail_status(*g_, c10::str(call, " (making the communicator)").c_str(), st);
  adopt(comm, idx);
}

cudaStream_t ProcessGroupP2PKit::lane_stream(Lane lane) {
  if (g_->streams[lane]) return g_->streams[lane];
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(g_->device));
  int least = 0, greatest = 0;
  C10_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  C10_CUDA_CHECK(cudaStreamCreateWithPriority(&g_->streams[lane], cudaStreamNonBlocking,
                                              g_->high_priority ? greatest : least));
  return g_->streams[lane];
}

// Stream s (lane `lane`) waits for the caller's stream when it is another,
// and for the group's earlier calls on other streams that this one must
// follow: every call follows the collectives; a collective follows the
// sends and receives too; a send does not wait for a receive nor a
// receive for a send (mu held, not under capture).
void ProcessGroupP2PKit::order_after(Lane lane, cudaStream_t s, cudaStream_t cur) {
  if (s != cur) {
    C10_CUDA_CHECK(cudaEventRecord(g_->ready, cur));
    C10_CUDA_CHECK(cudaStreamWaitEvent(s, g_->ready, 0));
  }
  for (int l = 0; l < kLanes; l++) {
    if ((lane == kSend && l == kRecv) || (lane == kRecv && l == kSend)) continue;
    const Work* w = g_->last[l].get();
    if (w && g_->last_stream[l] != s && g_->last_stream[l] != cur)
      C10_CUDA_CHECK(cudaStreamWaitEvent(s, w->end_, 0));
  }
}

// The call's Work: its end event recorded on s, watched, the group's last
// of its lane; the tensors kept when s is not the caller's stream.
c10::intrusive_ptr<Work> ProcessGroupP2PKit::finish(Call& call, Lane lane, cudaStream_t s,
                                                    cudaStream_t cur, bool capturing) {
  const bool p2p = call.lane == kSend || call.lane == kRecv;
  const uint64_t seq = p2p ? ++seq_p2p_ : ++seq_coll_;
  auto w = c10::make_intrusive<Work>(g_, call.type, call.name, seq,
                                     at::hasCallbacks() ? call.name : nullptr);
  if (call.async || p2p) {
    for (const at::Tensor& t : call.outs) w->keep_.push_back(t);
    w->nout_ = call.outs.size();
    if (s != cur)
      for (const at::Tensor& t : call.ins) w->keep_.push_back(t);
  }
  if (capturing) return w;
  w->end_ = g_->take_event();
  w->stream_ = s;
  w->timeout_ = call.timeout;
  C10_CUDA_CHECK(cudaEventRecord(w->end_, s));
  g_->inflight[lane].push_back(w);
  g_->last[lane] = w;
  g_->last_stream[lane] = s;
  return w;
}

// new_group of every rank, the default group's communicator made: a
// p2pkit_comm_split of it, color 0 on every rank (all of them call
// new_group, so all of them come here). A group of some ranks makes its
// communicator from a unique id instead: torch calls the parent of the
// other ranks only when they are not members and not under
// use_local_synchronization=True, and never hands a backend's creator the
// parent, so a split there could wait for ranks that never come.
void ProcessGroupP2PKit::split_from_world(const std::vector<int64_t>& global_ranks) {
  c10::intrusive_ptr<ProcessGroupP2PKit> parent;
  {
    std::lock_guard<std::mutex> lock(world_mu);
    parent = world.lock();
  }
  if (!parent || static_cast<int>(global_ranks.size()) != parent->getSize()) return;
  p2pkit_comm_t from;
  int device;
  {
    std::lock_guard<std::mutex> lock(parent->g_->mu);
    if (!parent->g_->comm || parent->g_->state != State::kOpen) return;
    from = parent->g_->comm;
    device = parent->g_->device;
  }
  p2pkit_config_t cfg = config(g_->timeout, options_->max_blocks);
  p2pkit_comm_t comm = nullptr;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  const p2pkit_status_t st = p2pkit_comm_split(from, 0, getRank(), &cfg, &comm);
  if (st != P2PKIT_SUCCESS) fail_status(*g_, "new_group (p2pkit_comm_split of the default group)", st);
  adopt(comm, device);
}

// split_group: every rank of this group calls it; the members of `ranks`
// (sorted) form one communicator, colored by its lowest rank, the others
// join none (NOCOLOR) and get no backend.
c10::intrusive_ptr<c10d::Backend> ProcessGroupP2PKit::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  auto mine = c10::dynamic_intrusive_pointer_cast<Options>(opts);
  auto child = c10::make_intrusive<Options>(mine ? *mine : *options_);
  child->timeout = group_timeout(opts->timeout);
  child->group_name = opts->group_name;
  const auto at = std::find(ranks.begin(), ranks.end(), getRank());
  const bool member = at != ranks.end();
  at::Device dev = getBoundDeviceId().value_or(
      at::Device(c10::kCUDA, g_->device >= 0 ? g_->device : c10::cuda::current_device()));
  ensure_comm(dev, "split_group");
  p2pkit_config_t cfg = config(child->timeout, child->max_blocks);
  p2pkit_comm_t comm = nullptr;
  {
    // The lock keeps the watchdog from aborting the parent's communicator
    // under the split; the child is made after it, since its constructor
    // takes the watchdog's lock, which the watchdog holds while it takes
    // this one (forget_idle).
    std::lock_guard<std::mutex> lock(g_->mu);
    g_->check_usable("split_group");
    const p2pkit_status_t st = p2pkit_comm_split(
        g_->comm, member ? ranks.front() : P2PKIT_SPLIT_NOCOLOR, getRank(), &cfg, &comm);
    if (st != P2PKIT_SUCCESS) fail_status(*g_, "split_group (p2pkit_comm_split)", st);
    split_count_++;
  }
  if (!member) return nullptr;
  auto pg = c10::make_intrusive<ProcessGroupP2PKit>(store, static_cast<int>(at - ranks.begin()),
                                                    static_cast<int>(ranks.size()), child);
  pg->adopt(comm, g_->device);
  pg->setBoundDeviceId(getBoundDeviceId());
  return pg;
}

void ProcessGroupP2PKit::performNocolorSplit(at::Device) {}

void ProcessGroupP2PKit::eagerConnectSingleDevice(at::Device device) {
  ensure_comm(device, "init_process_group(device_id=)");
}

void ProcessGroupP2PKit::setSequenceNumberForGroup() {}  // starts at 0, as ProcessGroupNCCL's

uint64_t ProcessGroupP2PKit::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(g_->mu);
  return seq_coll_;
}

void ProcessGroupP2PKit::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(g_->mu);
  g_->timeout = timeout;  // the watchdog's; the communicator keeps the one it was made with
  options_->timeout = timeout;
}

c10d::ErrorType ProcessGroupP2PKit::getError() {
  std::lock_guard<std::mutex> lock(g_->mu);
  return g_->error_type;
}

std::string ProcessGroupP2PKit::asyncError() {
  std::lock_guard<std::mutex> lock(g_->mu);
  if (!g_->comm) return g_->error;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (p2pkit_comm_get_async_error(g_->comm, &st) != P2PKIT_SUCCESS || st == P2PKIT_SUCCESS) return "";
  return c10::str(p2pkit_strerror(st), ": ", p2pkit_last_error());
}

// A failed job (torch's _abort_process_group, or the caller): the
// communicator is given up without waiting for any peer; every later call
// on the group raises, naming the abort.
void ProcessGroupP2PKit::abort() {
  std::lock_guard<std::mutex> lock(g_->mu);
  if (g_->state != State::kOpen) return;
  g_->state = State::kAborted;
  if (g_->error.empty()) g_->error = "abort() was called";
  if (g_->comm && p2pkit_comm_abort(g_->comm) != P2PKIT_SUCCESS)
    TORCH_WARN("p2pkit: abort: ", g_->desc, ": ", p2pkit_last_error());
  g_->comm = nullptr;
}

// destroy_process_group on every rank: the calls in flight end, then the
// communicator goes (collective).
void ProcessGroupP2PKit::shutdown() {
  p2pkit_comm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_->mu);
    if (g_->state != State::kOpen) return;
    g_->state = State::kShutDown;
    comm = g_->comm;
    g_->comm = nullptr;
  }
  if (comm && p2pkit_comm_destroy(comm) != P2PKIT_SUCCESS)
    TORCH_WARN("p2pkit: shutdown: ", g_->desc, ": ", p2pkit_last_error());
  std::vector<c10::intrusive_ptr<Work>> done;
  std::lock_guard<std::mutex> lock(g_->mu);
  g_->closed = true;
  g_->take_done(&done, true);
}

void ProcessGroupP2PKit::waitForPendingWorks() {
  std::vector<c10::intrusive_ptr<Work>> last;
  {
    std::lock_guard<std::mutex> lock(g_->mu);
    for (int l = 0; l < kLanes; l++)
      if (g_->last[l]) last.push_back(g_->last[l]);
  }
  for (auto& w : last) C10_CUDA_CHECK(cudaEventSynchronize(w->end_));
  sweep(*g_, true);
  std::lock_guard<std::mutex> lock(g_->mu);
  g_->take_done(&last, false);
}

}  // namespace p2pkit_torch
