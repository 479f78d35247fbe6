/* SPDX-License-Identifier: BSD-3-Clause */
// The backend's operations, each a thin layer over one p2pkit call (or a
// group of them): tensors checked, the type and operation mapped, run()
// does the rest. The reductions first, then the data movement. Reductions take p2pkit's types, and the types only NCCL
// has (int8, uint32, uint64, float8) through p2pkit's NCCL path; bool and
// complex as ProcessGroupNCCL maps them; PREMUL_SUM as a scale of the
// inputs then a sum. Everything else moves as bytes.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include "backend.hpp"


namespace p2pkit_torch {

using namespace ops;

namespace {

using c10d::ReduceOp;

// What a reduction of `t` hands p2pkit: the element type (`per` of them to
// one of the tensor's), the operation, a scale to apply first.
struct Red {
  p2pkit_dtype_t dtype;
  p2pkit_redop_t op;
  int per = 1;
  bool scale = false;
  double factor = 1.0;
  at::Tensor tfactor;
};

bool element(at::ScalarType t, p2pkit_dtype_t* dt) {
  switch (t) {
    case at::kFloat: *dt = P2PKIT_FLOAT32; return true;
    case at::kHalf: *dt = P2PKIT_FLOAT16; return true;
    case at::kBFloat16: *dt = P2PKIT_BFLOAT16; return true;
    case at::kDouble: *dt = P2PKIT_FLOAT64; return true;
    case at::kInt: *dt = P2PKIT_INT32; return true;
    case at::kLong: *dt = P2PKIT_INT64; return true;
    case at::kByte: *dt = P2PKIT_UINT8; return true;
    case at::kBool: *dt = P2PKIT_UINT8; return true;
    case at::kChar: *dt = P2PKIT_INT8; return true;
    case at::kUInt32: *dt = P2PKIT_UINT32; return true;
    case at::kUInt64: *dt = P2PKIT_UINT64; return true;
    case at::kFloat8_e4m3fn: *dt = P2PKIT_FLOAT8_E4M3; return true;
    case at::kFloat8_e5m2: *dt = P2PKIT_FLOAT8_E5M2; return true;
    default: return false;
  }
}

void premul(const char* call, at::ScalarType t, const ReduceOp& rop, Red* r) {
  TORCH_CHECK_TYPE(at::isFloatingType(t) || at::isComplexType(t), "p2pkit: ", call,
                   ": PREMUL_SUM of ", t, " tensors: the factor scales floating-point types "
                   "only (as ProcessGroupNCCL's)");
  // torch makes PREMUL_SUM only with this supplement (_make_nccl_premul_sum)
  const auto* sup = static_cast<const c10d::NCCLPreMulSumSupplement*>(rop.supplement_.get());
  TORCH_CHECK_VALUE(sup, "p2pkit: ", call, ": PREMUL_SUM without its factor");
  r->scale = true;
  r->factor = sup->double_factor;
  r->tfactor = sup->tensor_factor;
  r->op = P2PKIT_SUM;
}

Red reduction(const char* call, at::ScalarType t, const ReduceOp& rop) {
  Red r{};
  const ReduceOp::RedOpType k = rop.op_;
  TORCH_CHECK_VALUE(k != ReduceOp::BAND && k != ReduceOp::BOR && k != ReduceOp::BXOR, "p2pkit: ",
                    call, ": bitwise reductions (BAND, BOR, BXOR) are not supported (as with NCCL)");
  at::ScalarType base = at::isComplexType(t) ? c10::toRealValueType(t) : t;
  if (at::isComplexType(t)) {
    TORCH_CHECK_VALUE(c10d::isComplexViewAsRealAllowed(rop), "p2pkit: ", call, ": ", t,
                      " tensors reduce by SUM, AVG or PREMUL_SUM only");
    r.per = 2;
  }
  TORCH_CHECK_TYPE(element(base, &r.dtype), "p2pkit: ", call, ": ", t, " tensors are not "
                   "supported (p2pkit and NCCL reduce float32, float16, bfloat16, float64, int32, "
                   "int64, uint8, int8, uint32, uint64, float8 and bool; complex by SUM and AVG)");
  if (t == at::kBool) {
    TORCH_CHECK_TYPE(k != ReduceOp::AVG && k != ReduceOp::PREMUL_SUM, "p2pkit: ", call,
                     ": AVG and PREMUL_SUM of bool tensors are not supported");
    r.op = k == ReduceOp::SUM || k == ReduceOp::MAX ? P2PKIT_MAX : P2PKIT_MIN;  // any / all
    return r;
  }
  switch (k) {
    case ReduceOp::SUM: r.op = P2PKIT_SUM; break;
    case ReduceOp::AVG: r.op = P2PKIT_AVG; break;
    case ReduceOp::PRODUCT: r.op = P2PKIT_PROD; break;
    case ReduceOp::MIN: r.op = P2PKIT_MIN; break;
    case ReduceOp::MAX: r.op = P2PKIT_MAX; break;
    case ReduceOp::PREMUL_SUM: premul(call, t, rop, &r); break;
    default: TORCH_CHECK_VALUE(false, "p2pkit: ", call, ": unknown ReduceOp ", int(k));
  }
  return r;
}

// The memory an in-place call reads and writes: the tensor's own when it is
// contiguous in its own memory format (ProcessGroupNCCL's rule: every rank
// then lays the elements out alike), else a contiguous copy made on the
// call's stream and copied back.
bool in_place_ok(const at::Tensor& t) {
  return t.is_contiguous() || t.is_contiguous(t.suggest_memory_format());
}

struct Dense {
  Dense(const at::Tensor& t, cudaStream_t s) : orig(t) {
    if (in_place_ok(t)) {
      d = t;
      return;
    }
    OnStream on(s, t);
    d = t.contiguous();
  }
  void back(cudaStream_t s) {
    if (d.is_same(orig)) return;
    OnStream on(s, orig);
    orig.copy_(d);
  }
  at::Tensor d, orig;
};

// A scaled copy of `in` (PREMUL_SUM's input, on the call's stream), or `in`.
at::Tensor scaled(const at::Tensor& in, const Red& r, cudaStream_t s) {
  if (!r.scale) return in;
  OnStream on(s, in);
  return r.tfactor.defined() ? in * r.tfactor : in * r.factor;
}

// PREMUL_SUM's scale of `d` in place (an in-place all-reduce's input).
void scale(at::Tensor& d, const Red& r, cudaStream_t s) {
  if (!r.scale) return;
  OnStream on(s, d);
  r.tfactor.defined() ? d.mul_(r.tfactor) : d.mul_(r.factor);
}

}  // namespace

// ------------------------------------------------------------ reductions --

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = one(tensors, "all_reduce");
  Call call{"all_reduce", c10d::OpType::ALLREDUCE, kColl, opts.asyncOp,
            on_cuda("all_reduce", t), tensors, tensors,
            opts.timeout};
  const Red r = reduction("all_reduce", t.scalar_type(), opts.reduceOp);
  return run(call, [&](cudaStream_t s) {
    Dense d(t, s);
    scale(d.d, r, s);
    void* p = d.d.data_ptr();
    const p2pkit_status_t st = p2pkit_all_reduce(p, p, d.d.numel() * r.per, r.dtype, r.op, comm(),
                                                 s);
    d.back(s);
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "p2pkit: all_reduce_coalesced: no tensors");
  std::vector<Red> reds;
  for (const at::Tensor& t : tensors) {
    on_cuda("all_reduce_coalesced", t);
    same_device("all_reduce_coalesced", tensors[0], t);
    reds.push_back(reduction("all_reduce_coalesced", t.scalar_type(), opts.reduceOp));
  }
  Call call{"all_reduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, kColl, opts.asyncOp,
            tensors[0].device(), tensors, tensors,
            opts.timeout};
  return run(call, [&](cudaStream_t s) {
    std::vector<Dense> ds;
    GroupScope grp;
    p2pkit_status_t st = P2PKIT_SUCCESS;
    for (size_t i = 0; i < tensors.size() && st == P2PKIT_SUCCESS; i++) {
      ds.emplace_back(tensors[i], s);
      at::Tensor& d = ds.back().d;
      scale(d, reds[i], s);
      st = p2pkit_all_reduce(d.data_ptr(), d.data_ptr(), d.numel() * reds[i].per, reds[i].dtype,
                             reds[i].op, comm(), s);
    }
    st = grp.end(st);
    for (auto& d : ds) d.back(s);
    return st;
  });
}

// The root's tensor becomes the reduction, in place; the others' stay as
// they were (a PREMUL_SUM scales a copy).
c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  const at::Tensor& t = one(tensors, "reduce");
  Call call{"reduce", c10d::OpType::REDUCE, kColl, opts.asyncOp, on_cuda("reduce", t), tensors,
            tensors,
            opts.timeout};
  const Red r = reduction("reduce", t.scalar_type(), opts.reduceOp);
  return run(call, [&](cudaStream_t s) {
    Dense d(t, s);
    const at::Tensor src = scaled(d.d, r, s);
    const p2pkit_status_t st =
        p2pkit_reduce(src.data_ptr(), d.d.data_ptr(), d.d.numel() * r.per, r.dtype, r.op,
                      static_cast<int>(opts.rootRank), comm(), s);
    if (getRank() == opts.rootRank) d.back(s);
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor";
  same(name, output, input);
  dense(name, output, "output");
  dense(name, input, "input");
  TORCH_CHECK_VALUE(input.numel() == output.numel() * getSize(), "p2pkit: ", name, ": the input "
                    "has ", input.numel(), " elements, expected ", getSize(), " x ", output.numel());
  const Red r = reduction(name, input.scalar_type(), opts.reduceOp);
  at::Tensor outs[1] = {output}, ins[1] = {input};
  Call call{name, c10d::OpType::_REDUCE_SCATTER_BASE, kColl, opts.asyncOp,
            on_cuda(name, output), outs, ins,
            opts.timeout};
  return run(call, [&](cudaStream_t s) {
    const at::Tensor src = scaled(input, r, s);
    return p2pkit_reduce_scatter(src.data_ptr(), output.data_ptr(), output.numel() * r.per,
                                 r.dtype, r.op, comm(), s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK_VALUE(!outputs.empty() && outputs.size() == inputs.size(), "p2pkit: ", name, ": ",
                    outputs.size(), " outputs and ", inputs.size(), " inputs");
  std::vector<Red> reds;
  for (size_t i = 0; i < outputs.size(); i++) {
    same(name, outputs[i], inputs[i]);
    same_device(name, outputs[0], outputs[i]);
    dense(name, outputs[i], "output");
    dense(name, inputs[i], "input");
    on_cuda(name, inputs[i]);
    TORCH_CHECK_VALUE(inputs[i].numel() == outputs[i].numel() * getSize(), "p2pkit: ", name,
                      ": input ", i, " has ", inputs[i].numel(), " elements, expected ",
                      getSize(), " x ", outputs[i].numel());
    reds.push_back(reduction(name, inputs[i].scalar_type(), opts.reduceOp));
  }
  Call call{name, c10d::OpType::COALESCED, kColl, opts.asyncOp, outputs[0].device(), outputs,
            inputs,
            opts.timeout};
  return run(call, [&](cudaStream_t s) {
    GroupScope grp;
    p2pkit_status_t st = P2PKIT_SUCCESS;
    std::vector<at::Tensor> srcs;
    for (size_t i = 0; i < outputs.size() && st == P2PKIT_SUCCESS; i++) {
      srcs.push_back(scaled(inputs[i], reds[i], s));
      st = p2pkit_reduce_scatter(srcs.back().data_ptr(), outputs[i].data_ptr(),
                                 outputs[i].numel() * reds[i].per, reds[i].dtype, reds[i].op,
                                 comm(), s);
    }
    return grp.end(st);
  });
}

// The list form: equal shares as one reduce-scatter of the inputs side by
// side; shares of different sizes as one reduce per rank (rank r the root
// of share r), as ProcessGroupNCCL's.
c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter";
  const at::Tensor& out = one(outputs, name);
  TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                    "p2pkit: ", name, ": needs one list of ", getSize(), " inputs");
  const std::vector<at::Tensor>& ins = inputs[0];
  bool equal = true;
  for (const at::Tensor& t : ins) {
    same(name, out, t);
    on_cuda(name, t);
    equal &= t.numel() == out.numel();
  }
  dense(name, out, "output");
  TORCH_CHECK_VALUE(ins[getRank()].numel() == out.numel(), "p2pkit: ", name, ": this rank's "
                    "share has ", ins[getRank()].numel(), " elements, its output ", out.numel());
  const Red r = reduction(name, out.scalar_type(), opts.reduceOp);
  Call call{name, c10d::OpType::REDUCE_SCATTER, kColl, opts.asyncOp, on_cuda(name, out),
            outputs, ins,
            opts.timeout};
  return run(call, [&](cudaStream_t s) {
        if (equal) {
      at::Tensor flat;
      {
        OnStream on(s, out);
        flat = at::cat(ins).reshape(-1);
      }
      const at::Tensor src = scaled(flat, r, s);
      return p2pkit_reduce_scatter(src.data_ptr(), out.data_ptr(), out.numel() * r.per, r.dtype,
                                   r.op, comm(), s);
    }
    GroupScope grp;
    p2pkit_status_t st = P2PKIT_SUCCESS;
    std::vector<at::Tensor> srcs;
    for (int root = 0; root < getSize() && st == P2PKIT_SUCCESS; root++) {
      at::Tensor in;
      {
        OnStream on(s, out);
        in = ins[root].contiguous();
      }
      srcs.push_back(scaled(in, r, s));
      st = p2pkit_reduce(srcs.back().data_ptr(), root == getRank() ? out.data_ptr() : nullptr,
                         in.numel() * r.per, r.dtype, r.op, root, comm(), s);
    }
    return grp.end(st);
  });
}

// ------------------------------------------------------------- movement --
// The backend's data movement: broadcast, the all-gathers, gather and
// scatter, the all-to-alls, send and receive (alone or coalesced), the
// barrier. Every type moves as its bytes; what each rank moves is decided
// from what every rank of the call shares, never from one rank's own
// sizes (all_to_all_single is always p2pkit_all_to_allv, whatever the
// splits).

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
    Dense d(t, s);
    const p2pkit_status_t st = p2pkit_broadcast(d.d.data_ptr(), d.d.data_ptr(), bytes(d.d),
                                                P2PKIT_UINT8, static_cast<int>(opts.rootRank),
                                                comm(), s);
    d.back(s);
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
    same_device(name, outputs[0], outputs[i]);
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
// blocks the host too (ProcessGroupNCCL's barrier). Torch's barrier() names
// the device without an index ("cuda") when nothing bound one: the group's
// own GPU then, as ProcessGroupNCCL takes the GPU it used.
c10::intrusive_ptr<c10d::Work> ProcessGroupP2PKit::barrier(const c10d::BarrierOptions& opts) {
  at::Device dev(c10::kCUDA, c10::cuda::current_device());
  if (opts.device && opts.device->is_cuda() && opts.device->has_index()) dev = *opts.device;
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
