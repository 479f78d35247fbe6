// The backend's operations, each a thin layer over one p2pkit call (or a
// group of them): tensors checked, the type and operation mapped, run()
// does the rest. Reductions take p2pkit's types, and the types only NCCL
// has (int8, uint32, uint64, float8) through p2pkit's NCCL path; bool and
// complex as ProcessGroupNCCL maps them; PREMUL_SUM as a scale of the
// inputs then a sum. Everything else moves as bytes.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include "backend_impl.hpp"

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
    if (r.scale) {
      OnStream on(s, t);
      r.tfactor.defined() ? d.d.mul_(r.tfactor) : d.d.mul_(r.factor);
    }
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
      if (reds[i].scale) {
        OnStream on(s, d);
        reds[i].tfactor.defined() ? d.mul_(reds[i].tfactor) : d.mul_(reds[i].factor);
      }
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

}  // namespace p2pkit_torch
