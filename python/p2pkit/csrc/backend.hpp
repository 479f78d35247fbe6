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

#include <torch/csrc/distributed/c10d/Backend.hpp>
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

}  // namespace p2pkit_torch
