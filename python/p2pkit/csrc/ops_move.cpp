// The backend's data movement: broadcast, the all-gathers, gather and
// scatter, the all-to-alls, send and receive (alone or coalesced), the
// barrier. Every type moves as its bytes; what each rank moves is decided
// from what every rank of the call shares, never from one rank's own
// sizes (all_to_all_single is always p2pkit_all_to_allv, whatever the
// splits).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include "backend_impl.hpp"

namespace p2pkit_torch {

using namespace ops;

namespace {

// A list's tensors: on CUDA, contiguous, of `like`'s type.
void check_list(const char* call, const std::vector<at::Tensor>& ts, const at::Tensor& like) {
  for (const at::Tensor& t : ts) {
    on_cuda(call, t);
    same(call, like, t);
    dense(call, t, "listed");
  }
}

// Sends of sends[i] to to[i] and receives into recvs[i] from from[i], as
// one group (a rank's own block is a send to itself with its receive).
p2pkit_status_t grouped(const std::vector<at::Tensor>& sends, const std::vector<int>& to,
                        const std::vector<at::Tensor>& recvs, const std::vector<int>& from,
                        p2pkit_comm_t comm, cudaStream_t s) {
  GroupScope grp;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (size_t i = 0; i < sends.size() && st == P2PKIT_SUCCESS; i++)
    st = p2pkit_send(sends[i].data_ptr(), bytes(sends[i]), P2PKIT_UINT8, to[i], comm, s);
  for (size_t i = 0; i < recvs.size() && st == P2PKIT_SUCCESS; i++)
    st = p2pkit_recv(recvs[i].data_ptr(), bytes(recvs[i]), P2PKIT_UINT8, from[i], comm, s);
  return grp.end(st);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = one(tensors, "broadcast");
  Call call{"broadcast", c10d::OpType::BROADCAST, kColl, opts.asyncOp, on_cuda("broadcast", t),
            tensors, tensors,
            opts.timeout};
  return run(call, [&](cudaStream_t s) {
    at::Tensor d = t;
    if (!t.is_contiguous() && !t.is_contiguous(t.suggest_memory_format())) {
      OnStream on(s, t);
      d = t.contiguous();
    }
    const p2pkit_status_t st = p2pkit_broadcast(d.data_ptr(), d.data_ptr(), bytes(d), P2PKIT_UINT8,
                                                static_cast<int>(opts.rootRank), comm(), s);
    if (!d.is_same(t)) {
      OnStream on(s, t);
      t.copy_(d);
    }
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather_into_tensor";
  same(name, output, input);
  dense(name, output, "output");
  dense(name, input, "input");
  TORCH_CHECK_VALUE(output.numel() == input.numel() * getSize(), "p2pkit: ", name, ": the output "
                    "has ", output.numel(), " elements, expected ", getSize(), " x ", input.numel());
  at::Tensor outs[1] = {output}, ins[1] = {input};
  Call call{name, c10d::OpType::_ALLGATHER_BASE, kColl, opts.asyncOp, on_cuda(name, output), outs,
            ins,
            opts.timeout};
  return run(call, [&](cudaStream_t s) {
    return p2pkit_all_gather(input.data_ptr(), output.data_ptr(), bytes(input), P2PKIT_UINT8,
                             comm(), s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather_into_tensor_coalesced";
  TORCH_CHECK_VALUE(!outputs.empty() && outputs.size() == inputs.size(), "p2pkit: ", name, ": ",
                    outputs.size(), " outputs and ", inputs.size(), " inputs");
  for (size_t i = 0; i < outputs.size(); i++) {
    same(name, outputs[i], inputs[i]);
    dense(name, outputs[i], "output");
    dense(name, inputs[i], "input");
    on_cuda(name, inputs[i]);
    TORCH_CHECK_VALUE(outputs[i].numel() == inputs[i].numel() * getSize(), "p2pkit: ", name,
                      ": output ", i, " has ", outputs[i].numel(), " elements, expected ",
                      getSize(), " x ", inputs[i].numel());
  }
  Call call{name, c10d::OpType::COALESCED, kColl, opts.asyncOp, outputs[0].device(), outputs,
            inputs,
            opts.timeout};
  return run(call, [&](cudaStream_t s) {
    GroupScope grp;
    p2pkit_status_t st = P2PKIT_SUCCESS;
    for (size_t i = 0; i < outputs.size() && st == P2PKIT_SUCCESS; i++)
      st = p2pkit_all_gather(inputs[i].data_ptr(), outputs[i].data_ptr(), bytes(inputs[i]),
                             P2PKIT_UINT8, comm(), s);
    return grp.end(st);
  });
}

// The list form: outputs the input's size as one all-gather into a
// temporary then copies out; outputs of other sizes as one broadcast per
// rank (rank r the root of output r), as ProcessGroupNCCL's.
c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather";
  const at::Tensor& in = one(inputs, name);
  TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                    "p2pkit: ", name, ": needs one list of ", getSize(), " outputs");
  const std::vector<at::Tensor>& outs = outputs[0];
  check_list(name, outs, in);
  bool equal = true;
  for (const at::Tensor& o : outs) equal &= o.numel() == in.numel();
  TORCH_CHECK_VALUE(outs[getRank()].numel() == in.numel(), "p2pkit: ", name, ": this rank's "
                    "output has ", outs[getRank()].numel(), " elements, its input ", in.numel());
  Call call{name, c10d::OpType::ALLGATHER, kColl, opts.asyncOp, on_cuda(name, in), outs, inputs,
            opts.timeout};
  return run(call, [&](cudaStream_t s) {
    OnStream on(s, in);
    const at::Tensor src = in.contiguous();
    if (equal) {
      at::Tensor flat = at::empty({getSize(), src.numel()}, src.options());
      const p2pkit_status_t st = p2pkit_all_gather(src.data_ptr(), flat.data_ptr(), bytes(src),
                                                   P2PKIT_UINT8, comm(), s);
      for (int r = 0; r < getSize() && st == P2PKIT_SUCCESS; r++) outs[r].copy_(flat[r].view_as(outs[r]));
      return st;
    }
    GroupScope grp;
    p2pkit_status_t st = P2PKIT_SUCCESS;
    for (int r = 0; r < getSize() && st == P2PKIT_SUCCESS; r++)
      st = p2pkit_broadcast(r == getRank() ? src.data_ptr() : nullptr, outs[r].data_ptr(),
                            bytes(outs[r]), P2PKIT_UINT8, r, comm(), s);
    return grp.end(st);
  });
}

// Only what the root needs moves: every rank sends its input to the root,
// which receives each into its place (a group of sends and receives, as
// p2pkit_gather composes it).
c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* name = "gather";
  const at::Tensor& in = one(inputs, name);
  dense(name, in, "input");
  const int root = static_cast<int>(opts.rootRank), me = getRank();
  std::vector<at::Tensor> recvs, sends{in};
  std::vector<int> from, to{root};
  if (me == root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                      "p2pkit: ", name, ": the root needs one list of ", getSize(), " outputs");
    check_list(name, outputs[0], in);
    for (int r = 0; r < getSize(); r++) {
      TORCH_CHECK_VALUE(outputs[0][r].numel() == in.numel(), "p2pkit: ", name, ": output ", r,
                        " has ", outputs[0][r].numel(), " elements, the input ", in.numel());
      recvs.push_back(outputs[0][r]);
      from.push_back(r);
    }
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || outputs[0].empty(), "p2pkit: ", name, ": only the root "
                      "(rank ", root, ") takes outputs");
  }
  Call call{name, c10d::OpType::GATHER, kColl, opts.asyncOp, on_cuda(name, in), recvs, sends,
            opts.timeout};
  return run(call, [&](cudaStream_t s) { return grouped(sends, to, recvs, from, comm(), s); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* name = "scatter";
  const at::Tensor& out = one(outputs, name);
  dense(name, out, "output");
  const int root = static_cast<int>(opts.rootRank), me = getRank();
  std::vector<at::Tensor> sends, recvs{out};
  std::vector<int> to, from{root};
  if (me == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                      "p2pkit: ", name, ": the root needs one list of ", getSize(), " inputs");
    check_list(name, inputs[0], out);
    for (int r = 0; r < getSize(); r++) {
      TORCH_CHECK_VALUE(inputs[0][r].numel() == out.numel(), "p2pkit: ", name, ": input ", r,
                        " has ", inputs[0][r].numel(), " elements, the output ", out.numel());
      sends.push_back(inputs[0][r]);
      to.push_back(r);
    }
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || inputs[0].empty(), "p2pkit: ", name, ": only the root "
                      "(rank ", root, ") takes inputs");
  }
  Call call{name, c10d::OpType::SCATTER, kColl, opts.asyncOp, on_cuda(name, out), recvs, sends,
            opts.timeout};
  return run(call, [&](cudaStream_t s) { return grouped(sends, to, recvs, from, comm(), s); });
}

namespace {

// Byte counts and displacements of one side of all_to_all_single: `splits`
// rows of dim 0 to (from) each rank, or equal shares when empty.
void split_bytes(const char* call, const at::Tensor& t, const std::vector<int64_t>& splits,
                 int n, const char* what, std::vector<size_t>* count, std::vector<size_t>* displ) {
  const int64_t rows = t.dim() ? t.size(0) : 1;
  const size_t row = rows ? bytes(t) / static_cast<size_t>(rows) : 0;
  if (splits.empty()) {
    TORCH_CHECK_VALUE(rows % n == 0, "p2pkit: ", call, ": the ", what, "'s ", rows, " rows do not "
                      "split evenly over ", n, " ranks (give split sizes)");
  } else {
    TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == n, "p2pkit: ", call, ": ", splits.size(),
                      " ", what, " split sizes for ", n, " ranks");
  }
  int64_t at = 0;
  for (int p = 0; p < n; p++) {
    const int64_t k = splits.empty() ? rows / n : splits[p];
    TORCH_CHECK_VALUE(k >= 0, "p2pkit: ", call, ": ", what, " split size ", k, " is negative");
    count->push_back(static_cast<size_t>(k) * row);
    displ->push_back(static_cast<size_t>(at) * row);
    at += k;
  }
  TORCH_CHECK_VALUE(at == rows, "p2pkit: ", call, ": the ", what, " split sizes add up to ", at,
                    " rows; the tensor has ", rows);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all_single";
  same(name, output, input);
  dense(name, output, "output");
  dense(name, input, "input");
  std::vector<size_t> sc, sd, rc, rd;
  split_bytes(name, input, input_splits, getSize(), "input", &sc, &sd);
  split_bytes(name, output, output_splits, getSize(), "output", &rc, &rd);
  at::Tensor outs[1] = {output}, ins[1] = {input};
  Call call{name, c10d::OpType::ALLTOALL_BASE, kColl, opts.asyncOp, on_cuda(name, output), outs,
            ins,
            opts.timeout};
  return run(call, [&](cudaStream_t s) {
    return p2pkit_all_to_allv(input.data_ptr(), sc.data(), sd.data(), output.data_ptr(), rc.data(),
                              rd.data(), P2PKIT_UINT8, comm(), s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all";
  TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == getSize() &&
                        static_cast<int>(inputs.size()) == getSize(),
                    "p2pkit: ", name, ": needs ", getSize(), " outputs and inputs, got ",
                    outputs.size(), " and ", inputs.size());
  check_list(name, outputs, inputs[0]);
  check_list(name, inputs, inputs[0]);
  std::vector<int> peers;
  for (int p = 0; p < getSize(); p++) peers.push_back(p);
  Call call{name, c10d::OpType::ALLTOALL, kColl, opts.asyncOp, on_cuda(name, inputs[0]), outputs,
            inputs,
            opts.timeout};
  return run(call,
             [&](cudaStream_t s) { return grouped(inputs, peers, outputs, peers, comm(), s); });
}

// --------------------------------------------------------- send and recv --

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::send(std::vector<at::Tensor>& tensors, int dst,
                                                        int /*tag*/) {
  const at::Tensor& t = one(tensors, "send");
  on_cuda("send", t);
  dense("send", t, "sent");
  if (coalescing_) {
    deferred_.push_back({true, t, dst, nullptr});
    return deferred_.back().work = defer("send", c10d::OpType::SEND);
  }
  Call call{"send", c10d::OpType::SEND, kSend, true, on_cuda("send", t), {}, tensors};
  return run(call, [&](cudaStream_t s) {
    return p2pkit_send(t.data_ptr(), bytes(t), P2PKIT_UINT8, dst, comm(), s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::recv(std::vector<at::Tensor>& tensors, int src,
                                                        int /*tag*/) {
  const at::Tensor& t = one(tensors, "recv");
  on_cuda("recv", t);
  dense("recv", t, "received");
  if (coalescing_) {
    deferred_.push_back({false, t, src, nullptr});
    return deferred_.back().work = defer("recv", c10d::OpType::RECV);
  }
  Call call{"recv", c10d::OpType::RECV, kRecv, true, on_cuda("recv", t), tensors, {}};
  return run(call, [&](cudaStream_t s) {
    return p2pkit_recv(t.data_ptr(), bytes(t), P2PKIT_UINT8, src, comm(), s);
  });
}

// A send or receive between startCoalescing and endCoalescing: a Work
// that answers for the batch once it is issued.
c10::intrusive_ptr<Work> ProcessGroupP2PKit::defer(const char* name, c10d::OpType type) {
  auto w = c10::make_intrusive<Work>(g_, type, name, ++seq_p2p_, nullptr);
  w->deferred_ = true;
  return w;
}

void ProcessGroupP2PKit::startCoalescing() {
  if (coalescing_)
    TORCH_WARN("p2pkit: start_coalescing: ", g_->desc, ": an earlier batch was never ended; its "
               "sends and receives are dropped and this batch starts afresh");
  coalescing_ = true;
  deferred_.clear();
}

// The end of a coalescing block: its sends and receives (one
// batch_isend_irecv) as one group of p2pkit calls on the group's stream,
// one Work. That Work also answers for the collectives called inside the
// block (torch returns it in their place: _coalescing_manager with a
// device): its stream follows every call the group made before it.
c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::endCoalescing() {
  TORCH_CHECK(coalescing_, "p2pkit: end_coalescing: ", g_->desc, ": no batch was started");
  coalescing_ = false;
  std::vector<Deferred> ops;
  ops.swap(deferred_);
  if (ops.empty() && !made_.load())  // nothing was ever issued: nothing to wait for
    return c10::make_intrusive<Work>(g_, c10d::OpType::COALESCED, "coalesced", 0, nullptr);
  std::vector<at::Tensor> sends, recvs;
  std::vector<int> to, from;
  for (const Deferred& d : ops) {
    (d.send ? sends : recvs).push_back(d.t);
    (d.send ? to : from).push_back(d.peer);
  }
  const at::Device dev = ops.empty() ? at::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(g_->device))
                                     : ops[0].t.device();
  Call call{"send/recv (coalesced)", c10d::OpType::COALESCED, kColl, true, dev, recvs, sends};
  auto w = run(call, [&](cudaStream_t s) {
    return ops.empty() ? P2PKIT_SUCCESS : grouped(sends, to, recvs, from, comm(), s);
  });
  auto batch = c10::static_intrusive_pointer_cast<Work>(w);
  for (Deferred& d : ops) {
    d.work->batch_ = batch;
    d.work->deferred_ = false;
  }
  return w;
}

// All ranks arrive: an all-reduce of one element, whose Work's wait()
// blocks the host too (ProcessGroupNCCL's barrier).
c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::barrier(const c10d::BarrierOptions& opts) {
  at::Device dev(c10::kCUDA, c10::cuda::current_device());
  if (opts.device && opts.device->is_cuda()) dev = *opts.device;
  else if (!opts.device_ids.empty()) dev = at::Device(c10::kCUDA, opts.device_ids[0]);
  else if (getBoundDeviceId()) dev = *getBoundDeviceId();
  else if (g_->device >= 0) dev = at::Device(c10::kCUDA, g_->device);
  if (!barrier_tensor_.defined() || barrier_tensor_.device() != dev)
    barrier_tensor_ = at::zeros({1}, at::TensorOptions().device(dev).dtype(at::kFloat));
  std::vector<at::Tensor> ts{barrier_tensor_};
  c10d::AllreduceOptions ar;
  ar.asyncOp = true;
  ar.timeout = opts.timeout;
  auto w = c10::static_intrusive_pointer_cast<Work>(allreduce(ts, ar));
  w->blocking_ = true;
  return w;
}

}  // namespace p2pkit_torch
