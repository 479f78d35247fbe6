"""The torch.distributed backend "p2pkit", registered when p2pkit is imported
with torch present:

    import p2pkit, torch.distributed as dist
    dist.init_process_group("cpu:gloo,cuda:p2pkit")   # under torchrun

Every process group (the default one, each new_group, each DeviceMesh
dimension) gets its own p2pkit communicator, made at the group's first CUDA
call on the tensor's GPU: rank 0 of the group makes a unique id and puts it
in the store torch hands the backend, the others read it (no second port).

Calls behave as ProcessGroupNCCL's: the collective is ordered after the
current stream (it runs on a stream of the group's that waits for it),
async_op=True returns at once, work.wait() makes the current stream wait,
the tensors are kept alive until the collective is done. Errors are raised
as p2pkit.P2PKitError naming the call; a collective's asynchronous error
(ranks that disagree, a peer that died) is raised by work.wait() and by the
group's next call.

What p2pkit cannot do goes to a ProcessGroupNCCL made on first need from the
same store (prefix "p2pkit-nccl/"), with a warning naming the reason once:
reductions of types p2pkit lacks (int8, int16, uint16..64, float8),
BAND/BOR/BXOR, PREMUL_SUM of integers, uneven all-to-all, all-gather and
reduce-scatter lists of unequal sizes. CPU tensors go to a ProcessGroupGloo
made the same way ("p2pkit-gloo/"). What goes where is decided in
p2pkit/_plan.py.

P2PKIT_TORCH_WORK=future returns torch's own Work around a future
(_create_work_from_future) instead of this module's Work subclass: then
work.wait() cannot raise the asynchronous error (the next call still does).
P2PKIT_TORCH_SAME_STREAM=1 enqueues on the current stream instead of the
group's own (no overlap; as under CUDA graph capture, where that is always
so)."""
import datetime
import os
import warnings

import torch
import torch.distributed as dist

import p2pkit
from p2pkit import _plan

__all__ = ["ProcessGroupP2PKit", "BACKEND_NAME", "create"]

BACKEND_NAME = "p2pkit"
_UID_KEY = "p2pkit/unique_id"
_WARNED = set()


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _op_of(reduce_op):
    """(torch's operation name in lower case, PREMUL_SUM factor or None)."""
    kind = getattr(reduce_op, "op", reduce_op)  # ReduceOp or RedOpType
    name = getattr(kind, "name", None) or str(kind).split(".")[-1]
    name = name.lower()
    factor = None
    if name == "premul_sum":
        # ReduceOp pickles as (op, factor); factor: a float or a tensor.
        factor = reduce_op.__getstate__()[1]
    return name, factor


def _flat(t):
    return t.reshape(-1)


def _bytes_view(t):
    return _flat(t).view(torch.uint8)


class _Work(dist.Work):
    """A p2pkit call's Work: wait() raises the communicator's asynchronous
    error, then makes the current stream wait for the call."""

    def __init__(self, pg, name, fut):
        super().__init__()
        self._pg, self._name, self._fut = pg, name, fut

    def wait(self, timeout=None):
        self._pg._raise_async(f"{self._name}: work.wait()")
        self._fut.wait()
        return True

    def get_future(self):
        return self._fut

    def is_completed(self):
        return self._fut.done()

    def is_success(self):
        return self._pg._async_error() is None

    def exception(self):
        return self._pg._async_error()

    def result(self):
        v = self._fut.value()
        return v if isinstance(v, list) else [v]

    def synchronize(self):
        self.wait()

    def source_rank(self):
        return -1


class ProcessGroupP2PKit(dist.ProcessGroup):
    """One process group on p2pkit; see the module's docstring."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._store, self._rank, self._size = store, rank, size
        self._timeout = timeout if timeout is not None else datetime.timedelta(minutes=10)
        self._comm = None
        self._ended = None  # "aborted" or "shut down": no communicator is made again
        self._device = None
        self._streams = {}
        self._nccl = None
        self._gloo = None
        self._coalescing = None  # list of queued send/recv while coalescing
        self._unsupported = None  # why p2pkit could not make a communicator (all to NCCL)
        self._group_name, self._group_desc = "", ""

    # --- identity ---------------------------------------------------------
    def getBackendName(self):
        return BACKEND_NAME

    # torch names a group on the ProcessGroup it made first; this one
    # replaces it (a Python ProcessGroup does), so the name is kept here, or
    # read from torch's table of groups (functional collectives and DeviceMesh
    # find groups by name).
    def getGroupName(self):
        if not self._group_name:
            world = getattr(dist.distributed_c10d, "_world", None)
            self._group_name = (getattr(world, "pg_names", {}) or {}).get(self, "")
        return self._group_name

    def setGroupName(self, name):
        self._group_name = name

    def getGroupDesc(self):
        return self._group_desc

    def setGroupDesc(self, desc):
        self._group_desc = desc

    def name(self):
        return BACKEND_NAME

    # torch asks a group for its backend of a device (init_process_group with
    # device_id, new_group's split check): this group is its own, and does
    # not split (every sub-group gets a communicator of its own).
    supports_splitting = False

    def _get_backend(self, device=None):
        return self

    def __repr__(self):
        return (f"ProcessGroupP2PKit(rank={self._rank}, size={self._size}, "
                f"device={self._device}, comm={'yes' if self._comm else 'not yet'})")

    # --- the communicator and the fallbacks -------------------------------
    def _ensure(self, device, name):
        """The communicator of `device` (made on first use: collective)."""
        self._check_open(name)
        if self._comm is not None:
            if device.index != self._device.index:
                raise ValueError(f"p2pkit backend: {name}: the tensor is on {device}, but this "
                                 f"group's communicator is on {self._device} (one GPU per rank)")
            return self._comm
        idx = device.index if device.index is not None else torch.cuda.current_device()
        with torch.cuda.device(idx):
            if self._rank == 0:
                uid = p2pkit.get_unique_id()
                self._store.set(_UID_KEY, uid)
            else:
                uid = bytes(self._store.get(_UID_KEY))
            self._comm = p2pkit.Comm(unique_id=uid, rank=self._rank, world_size=self._size,
                                     device=idx)
        self._device = torch.device("cuda", idx)
        return self._comm

    def _check_open(self, name):
        if self._ended is not None:
            raise ValueError(f"p2pkit backend: {name}: this group was {self._ended}")

    def _nccl_pg(self, name, reason):
        self._check_open(name)
        key = (name, reason)
        if key not in _WARNED:
            _WARNED.add(key)
            warnings.warn(f"p2pkit backend: {name}: {reason}; handed to NCCL", stacklevel=3)
        if self._nccl is None:
            if not hasattr(dist, "ProcessGroupNCCL"):
                raise RuntimeError(f"p2pkit backend: {name}: {reason}, and this torch has no NCCL "
                                   f"to hand it to")
            opts = dist.ProcessGroupNCCL.Options()
            opts._timeout = self._timeout
            self._nccl = dist.ProcessGroupNCCL(dist.PrefixStore("p2pkit-nccl/", self._store),
                                               self._rank, self._size, opts)
        return self._nccl

    def _gloo_pg(self):
        if self._gloo is None:
            self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("p2pkit-gloo/", self._store),
                                               self._rank, self._size, self._timeout)
        return self._gloo

    def _route(self, name, tensors, plan=None):
        """None when p2pkit takes the call, else the backend that does (gloo
        for CPU tensors, NCCL for what p2pkit cannot do)."""
        if not tensors:
            return None
        if any(not t.is_cuda for t in tensors):
            if all(not t.is_cuda for t in tensors):
                return self._gloo_pg()
            raise ValueError(f"p2pkit backend: {name}: CPU and CUDA tensors in one call")
        if plan is not None and plan.kind == "nccl":
            return self._nccl_pg(name, plan.reason)
        if self._unsupported:
            return self._nccl_pg(name, self._unsupported)
        try:
            self._ensure(tensors[0].device, name)
        except p2pkit.P2PKitError as e:
            if e.status != 9:  # P2PKIT_ERR_UNSUPPORTED (ranks on several hosts)
                raise p2pkit.P2PKitError(f"{name} (making the group's p2pkit communicator)",
                                         e.status, e.name, e.detail) from None
            self._unsupported = f"p2pkit cannot serve this group ({e.detail})"
            return self._nccl_pg(name, self._unsupported)
        return None

    def _async_error(self):
        return self._comm.async_error() if self._comm is not None else None

    def _raise_async(self, where):
        err = self._async_error()
        if err is not None:
            raise p2pkit.P2PKitError(f"{where} (group rank {self._rank} of {self._size}: an "
                                     f"earlier collective failed on the GPU)", err.status, err.name,
                                     err.detail)

    def _stream(self, kind):
        s = self._streams.get(kind)
        if s is None:
            s = self._streams[kind] = torch.cuda.Stream(device=self._device)
        return s

    def _launch(self, name, keep, enqueue, result, kind="coll"):
        """Run enqueue(stream_handle) ordered after the current stream and
        return its Work; `keep`: tensors the call reads or writes."""
        self._raise_async(name)
        dev = self._device
        cur = torch.cuda.current_stream(dev)
        capturing = torch.cuda.is_current_stream_capturing()
        same = capturing or os.environ.get("P2PKIT_TORCH_SAME_STREAM") == "1"
        s = cur if same else self._stream(kind)
        if s is not cur:
            s.wait_stream(cur)
        with torch.cuda.device(dev), torch.cuda.stream(s):
            try:
                enqueue(s.cuda_stream)
            except p2pkit.P2PKitError as e:
                raise p2pkit.P2PKitError(f"{name} (group rank {self._rank} of {self._size})",
                                         e.status, e.name, e.detail) from None
            if s is not cur:
                for t in keep:
                    t.record_stream(s)
            fut = torch.futures.Future() if capturing else torch.futures.Future(devices=[dev])
            fut.set_result(result)
        return self._work(name, fut)

    def _work(self, name, fut):
        if os.environ.get("P2PKIT_TORCH_WORK") == "future":
            return torch._C._distributed_c10d._create_work_from_future(fut)
        return _Work(self, name, fut)

    def _call(self, fn, stream, *args):
        p2pkit._run(fn, stream, self._comm, *args)

    @staticmethod
    def _dense(t):
        """(contiguous tensor to hand to p2pkit, tensor to copy back to or None)."""
        if t.is_contiguous():
            return t, None
        return t.contiguous(), t

    # --- reductions ---------------------------------------------------------
    def _reduce_view(self, t, plan):
        if plan.view == "uint8":
            return t.view(torch.uint8)
        if plan.view == "real":
            return torch.view_as_real(t)
        return t

    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceOptions()
        opname, factor = _op_of(opts.reduceOp)
        plan = _plan.reduction(_dtype_name(tensors[0]), opname) if tensors else None
        other = self._route("all_reduce", tensors, plan)
        if other is not None:
            return other.allreduce(tensors, opts)
        return self._allreduce_list("all_reduce", tensors, plan, factor)

    def _allreduce_list(self, name, tensors, plan, factor):
        def enqueue(s):
            for t in tensors:
                if t.numel() == 0:
                    continue
                d, back = self._dense(t)
                if plan.prescale:
                    d.mul_(factor)
                v = self._reduce_view(d, plan)
                self._call("p2pkit_all_reduce", s, v.data_ptr(), v.data_ptr(), v.numel(),
                           _plan.NATIVE[_dtype_name(v)], plan.op)
                if back is not None:
                    back.copy_(d)
        return self._launch(name, tensors, enqueue, list(tensors))

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceCoalescedOptions()
        opname, factor = _op_of(opts.reduceOp)
        plans = [_plan.reduction(_dtype_name(t), opname) for t in tensors]
        bad = next((p for p in plans if p.kind == "nccl"), None)
        other = self._route("all_reduce_coalesced", tensors, bad)
        if other is not None:
            return other.allreduce_coalesced(tensors, opts)
        if len({t.dtype for t in tensors}) == 1 and len(tensors) > 1:
            # One all-reduce over the tensors side by side.
            plan = plans[0]
            flat = torch.cat([_flat(t) for t in tensors])
            work = self._allreduce_list("all_reduce_coalesced", [flat], plan, factor)
            work.wait()
            off = 0
            for t in tensors:
                n = t.numel()
                t.copy_(flat[off:off + n].view_as(t))
                off += n
            return self._launch("all_reduce_coalesced", tensors + [flat], lambda s: None,
                                list(tensors))
        return self._allreduce_list("all_reduce_coalesced", tensors, plans[0], factor)

    def reduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.ReduceOptions()
        opname, factor = _op_of(opts.reduceOp)
        t = tensors[0]
        plan = _plan.reduction(_dtype_name(t), opname)
        other = self._route("reduce", tensors, plan)
        if other is not None:
            return other.reduce(tensors, opts)
        root = opts.rootRank

        def enqueue(s):
            if t.numel() == 0:
                return
            d, back = self._dense(t)
            src = d * factor if plan.prescale else d
            v_src, v_dst = self._reduce_view(src, plan), self._reduce_view(d, plan)
            self._call("p2pkit_reduce", s, v_src.data_ptr(), v_dst.data_ptr(), v_src.numel(),
                       _plan.NATIVE[_dtype_name(v_src)], plan.op, root)
            if back is not None and self._rank == root:
                back.copy_(d)
        return self._launch("reduce", [t], enqueue, [t])

    def _reduce_scatter_flat(self, name, out, inp, opname, factor):
        plan = _plan.reduction(_dtype_name(out), opname)
        if plan.kind == "nccl":
            return plan

        def enqueue(s):
            if out.numel() == 0:
                return
            src = inp.contiguous()
            if plan.prescale:
                src = src * factor
            d, back = self._dense(out)
            v_src, v_dst = self._reduce_view(src, plan), self._reduce_view(d, plan)
            self._call("p2pkit_reduce_scatter", s, v_src.data_ptr(), v_dst.data_ptr(),
                       v_dst.numel(), _plan.NATIVE[_dtype_name(v_dst)], plan.op)
            if back is not None:
                back.copy_(d)
        return enqueue

    def _check_whole(self, name, out, inp, whole):
        """One tensor (`whole`: "input" of a reduce-scatter, "output" of an
        all-gather) holds the group's size times the other, of one type."""
        big, small, part = (inp, out, "output") if whole == "input" else (out, inp, "input")
        if big.numel() != small.numel() * self._size:
            raise ValueError(f"p2pkit backend: {name}: the {whole} has {big.numel()} elements, "
                             f"expected {self._size} x {small.numel()} (the {part}'s)")
        if inp.dtype != out.dtype:
            raise ValueError(f"p2pkit backend: {name}: input {inp.dtype}, output {out.dtype}")

    def _reduce_scatter_base(self, output, input, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        opname, factor = _op_of(opts.reduceOp)
        plan = _plan.reduction(_dtype_name(output), opname)
        other = self._route("reduce_scatter_tensor", [output, input], plan)
        if other is not None:
            return other._reduce_scatter_base(output, input, opts)
        self._check_whole("reduce_scatter_tensor", output, input, "input")
        enqueue = self._reduce_scatter_flat("reduce_scatter_tensor", output, input, opname, factor)
        return self._launch("reduce_scatter_tensor", [output, input], enqueue, [output])

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        opname, factor = _op_of(opts.reduceOp)
        out, ins = output_tensors[0], input_lists[0]
        plan = _plan.reduction(_dtype_name(out), opname)
        if plan.kind == "p2pkit":
            plan = _plan.same_sizes("reduce_scatter", [out.numel()] + [t.numel() for t in ins])
        other = self._route("reduce_scatter", [out] + list(ins), plan)
        if other is not None:
            return other.reduce_scatter(output_tensors, input_lists, opts)
        if len(ins) != self._size:
            raise ValueError(f"p2pkit backend: reduce_scatter: {len(ins)} inputs for "
                             f"{self._size} ranks")
        def enqueue(s):
            flat = torch.cat([_flat(t) for t in ins])  # made on s: freed after the call
            self._reduce_scatter_flat("reduce_scatter", out, flat, opname, factor)(s)
        return self._launch("reduce_scatter", [out] + list(ins), enqueue, [out])

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        opname, factor = _op_of(opts.reduceOp)
        plans = [_plan.reduction(_dtype_name(o), opname) for o in outputs]
        bad = next((p for p in plans if p.kind == "nccl"), None)
        other = self._route("reduce_scatter_tensor_coalesced", list(outputs) + list(inputs), bad)
        if other is not None:
            return other.reduce_scatter_tensor_coalesced(outputs, inputs, opts)
        steps = []
        for o, i in zip(outputs, inputs):
            self._check_whole("reduce_scatter_tensor_coalesced", o, i, "input")
            steps.append(self._reduce_scatter_flat("reduce_scatter_tensor_coalesced", o, i, opname,
                                                   factor))

        def enqueue(s):
            for step in steps:
                step(s)
        return self._launch("reduce_scatter_tensor_coalesced", list(outputs) + list(inputs),
                            enqueue, list(outputs))

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    # --- data movement ----------------------------------------------------------
    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else dist.BroadcastOptions()
        other = self._route("broadcast", tensors)
        if other is not None:
            return other.broadcast(tensors, opts)
        root = opts.rootRank

        def enqueue(s):
            for t in tensors:
                if t.numel() == 0:
                    continue
                d, back = self._dense(t)
                v = _bytes_view(d)
                self._call("p2pkit_broadcast", s, v.data_ptr(), v.data_ptr(), v.numel(),
                           _plan.NATIVE["uint8"], root)
                if back is not None:
                    back.copy_(d)
        return self._launch("broadcast", tensors, enqueue, list(tensors))

    def _gather_flat(self, s, out, inp):
        """p2pkit all-gather of inp (any type, as bytes) into out (n x inp)."""
        if inp.numel() == 0:
            return
        src = _bytes_view(inp.contiguous())
        d, back = self._dense(out)
        dst = _bytes_view(d)
        self._call("p2pkit_all_gather", s, src.data_ptr(), dst.data_ptr(), src.numel(),
                   _plan.NATIVE["uint8"])
        if back is not None:
            back.copy_(d)

    def _allgather_base(self, output, input, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        other = self._route("all_gather_into_tensor", [output, input])
        if other is not None:
            return other._allgather_base(output, input, opts)
        self._check_whole("all_gather_into_tensor", output, input, "output")
        return self._launch("all_gather_into_tensor", [output, input],
                            lambda s: self._gather_flat(s, output, input), [output])

    all_gather_single = _allgather_base

    def allgather(self, output_lists, input_tensors, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        outs, inp = output_lists[0], input_tensors[0]
        plan = _plan.same_sizes("all_gather", [inp.numel()] + [t.numel() for t in outs])
        other = self._route("all_gather", list(outs) + [inp], plan)
        if other is not None:
            return other.allgather(output_lists, input_tensors, opts)
        if len(outs) != self._size:
            raise ValueError(f"p2pkit backend: all_gather: {len(outs)} outputs for "
                             f"{self._size} ranks")

        def enqueue(s):
            flat = torch.empty(self._size * inp.numel(), dtype=inp.dtype, device=inp.device)
            self._gather_flat(s, flat, inp)
            for r, o in enumerate(outs):
                o.copy_(flat[r * inp.numel():(r + 1) * inp.numel()].view_as(o))
        return self._launch("all_gather", list(outs) + [inp], enqueue, list(outs))

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        other = self._route("all_gather_into_tensor_coalesced", list(outputs) + list(inputs))
        if other is not None:
            return other.allgather_into_tensor_coalesced(outputs, inputs, opts)
        for o, i in zip(outputs, inputs):
            self._check_whole("all_gather_into_tensor_coalesced", o, i, "output")

        def enqueue(s):
            for o, i in zip(outputs, inputs):
                self._gather_flat(s, o, i)
        return self._launch("all_gather_into_tensor_coalesced", list(outputs) + list(inputs),
                            enqueue, list(outputs))

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def gather(self, output_lists, input_tensors, opts=None):
        opts = opts if opts is not None else dist.GatherOptions()
        inp = input_tensors[0]
        outs = output_lists[0] if output_lists else []
        other = self._route("gather", [inp] + list(outs))
        if other is not None:
            return other.gather(output_lists, input_tensors, opts)
        root = opts.rootRank

        def enqueue(s):
            flat = torch.empty(self._size * inp.numel(), dtype=inp.dtype, device=inp.device)
            self._gather_flat(s, flat, inp)
            if self._rank == root:
                for r, o in enumerate(outs):
                    o.copy_(flat[r * inp.numel():(r + 1) * inp.numel()].view_as(o))
        return self._launch("gather", [inp] + list(outs), enqueue, list(outs))

    def scatter(self, output_tensors, input_lists, opts=None):
        opts = opts if opts is not None else dist.ScatterOptions()
        out = output_tensors[0]
        ins = input_lists[0] if input_lists else []
        other = self._route("scatter", [out] + list(ins))
        if other is not None:
            return other.scatter(output_tensors, input_lists, opts)
        root, n = opts.rootRank, out.numel()

        def enqueue(s):
            if self._rank == root:
                flat = torch.cat([_flat(t) for t in ins])
            else:
                flat = torch.empty(self._size * n, dtype=out.dtype, device=out.device)
            if flat.numel():
                v = _bytes_view(flat)
                self._call("p2pkit_broadcast", s, v.data_ptr(), v.data_ptr(), v.numel(),
                           _plan.NATIVE["uint8"], root)
            out.copy_(flat[self._rank * n:(self._rank + 1) * n].view_as(out))
        return self._launch("scatter", [out] + list(ins), enqueue, [out])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        if input.is_cuda:
            plan = _plan.all_to_all(self._size, input.numel(), output.numel(),
                                    input_split_sizes, output_split_sizes)
        else:
            plan = None
        other = self._route("all_to_all_single", [output, input], plan)
        if other is not None:
            return other.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)
        if output.dtype != input.dtype:
            raise ValueError(f"p2pkit backend: all_to_all_single: input {input.dtype}, output "
                             f"{output.dtype}")

        def enqueue(s):
            if input.numel() == 0:
                return
            src = _bytes_view(input.contiguous())
            d, back = self._dense(output)
            dst = _bytes_view(d)
            self._call("p2pkit_all_to_all", s, src.data_ptr(), dst.data_ptr(),
                       src.numel() // self._size, _plan.NATIVE["uint8"])
            if back is not None:
                back.copy_(d)
        return self._launch("all_to_all_single", [output, input], enqueue, [output])

    all_to_all_single = alltoall_base

    def alltoall(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        sizes = [t.numel() for t in list(output_tensors) + list(input_tensors)]
        plan = _plan.same_sizes("all_to_all", sizes)
        other = self._route("all_to_all", list(output_tensors) + list(input_tensors), plan)
        if other is not None:
            return other.alltoall(output_tensors, input_tensors, opts)
        n = input_tensors[0].numel()

        def enqueue(s):
            src = _bytes_view(torch.cat([_flat(t) for t in input_tensors]))
            dst_t = torch.empty(self._size * n, dtype=input_tensors[0].dtype,
                                device=input_tensors[0].device)
            dst = _bytes_view(dst_t)
            if n:
                self._call("p2pkit_all_to_all", s, src.data_ptr(), dst.data_ptr(),
                           src.numel() // self._size, _plan.NATIVE["uint8"])
            for r, o in enumerate(output_tensors):
                o.copy_(dst_t[r * n:(r + 1) * n].view_as(o))
        return self._launch("all_to_all", list(output_tensors) + list(input_tensors), enqueue,
                            list(output_tensors))

    # --- point to point -----------------------------------------------------------
    def _p2p(self, name, fn, tensors, peer):
        other = self._route(name, tensors)
        if other is not None:
            return getattr(other, name)(tensors, peer, 0)
        t = tensors[0]
        if not t.is_contiguous():
            raise ValueError(f"p2pkit backend: {name}: the tensor is not contiguous")
        if self._coalescing is not None:
            self._coalescing.append((fn, t, peer))
            fut = torch.futures.Future()
            fut.set_result([t])
            return self._work(name, fut)

        def enqueue(s):
            if t.numel():
                v = _bytes_view(t)
                self._call(fn, s, v.data_ptr(), v.numel(), _plan.NATIVE["uint8"], int(peer))
        # Sends and receives on streams of their own: a rank's send waits for
        # no receive of its own (isend then irecv between two ranks).
        return self._launch(name, [t], enqueue, [t], kind=name)

    def send(self, tensors, dst_rank, tag=0):
        return self._p2p("send", "p2pkit_send", tensors, dst_rank)

    def recv(self, tensors, src_rank, tag=0):
        return self._p2p("recv", "p2pkit_recv", tensors, src_rank)

    def start_coalescing(self, device=None):
        if self._coalescing is not None:
            raise RuntimeError("p2pkit backend: coalescing started twice")
        self._coalescing = []

    def end_coalescing(self, device=None):
        ops, self._coalescing = self._coalescing or [], None
        if not ops:
            fut = torch.futures.Future()
            fut.set_result([])
            return self._work("coalesced", fut)

        def enqueue(s):
            with p2pkit.group():
                for fn, t, peer in ops:
                    if t.numel():
                        v = _bytes_view(t)
                        self._call(fn, s, v.data_ptr(), v.numel(), _plan.NATIVE["uint8"], int(peer))
        return self._launch("send/recv (coalesced)", [t for _, t, _ in ops], enqueue,
                            [t for _, t, _ in ops], kind="p2p")

    _start_coalescing = start_coalescing
    _end_coalescing = end_coalescing

    # --- the rest ------------------------------------------------------------------
    def barrier(self, opts=None):
        """All ranks arrive: an all-reduce of one element on the GPU, waited
        for on the host (as ProcessGroupNCCL's barrier)."""
        if self._device is not None:
            dev = self._device
        else:
            ids = list(getattr(opts, "device_ids", []) or [])
            dev = torch.device("cuda", ids[0] if ids else torch.cuda.current_device())
        t = torch.zeros(1, device=dev)
        self._route("barrier", [t])
        work = self.allreduce([t], dist.AllreduceOptions())
        work.wait()
        torch.cuda.current_stream(dev).synchronize()
        self._raise_async("barrier")
        fut = torch.futures.Future()
        fut.set_result([t])
        return self._work("barrier", fut)

    def shutdown(self):
        """Collective: the group's communicator goes, and the NCCL group
        made for what p2pkit cannot do (destroy_process_group calls this on
        every rank from torch 2.9 on)."""
        self._ended = self._ended or "shut down"
        if self._comm is not None:
            comm, self._comm = self._comm, None
            try:
                comm.close()
            except p2pkit.P2PKitError as e:
                warnings.warn(f"p2pkit backend: closing the communicator: {e}")
        for other in (self._nccl, self._gloo):
            stop = getattr(other, "shutdown", None) or getattr(other, "_shutdown", None)
            if stop is not None:
                try:
                    stop()
                except RuntimeError:
                    pass
        self._nccl = self._gloo = None

    def abort(self):
        """A failed job (torch's _abort_process_group, a watchdog): the
        communicator is given up without waiting for any peer
        (p2pkit_comm_abort), and the NCCL group beside it aborted too."""
        self._ended = "aborted"
        if self._comm is not None:
            comm, self._comm = self._comm, None
            try:
                comm.abort()
            except p2pkit.P2PKitError as e:
                warnings.warn(f"p2pkit backend: aborting the communicator: {e}")
        other = self._nccl
        stop = getattr(other, "abort", None) or getattr(other, "_abort", None)
        if stop is not None:
            try:
                stop()
            except RuntimeError:
                pass
        self._nccl = self._gloo = None


def create(store, rank, size, timeout):
    """The creator torch.distributed calls for each group of this backend.

    A Python ProcessGroup replaces the one torch made for the group, with
    the backends torch made before it ("cpu:gloo" of "cpu:gloo,cuda:p2pkit"),
    which then go away. Every rank waits here until all have arrived, so no
    rank drops its gloo connections while another is still making them."""
    pg = ProcessGroupP2PKit(store, rank, size, timeout)
    store.set(f"p2pkit/created/{rank}", "1")
    store.wait([f"p2pkit/created/{r}" for r in range(size)],
               timeout if timeout is not None else datetime.timedelta(minutes=10))
    return pg


def _register():
    plugins = getattr(dist.Backend, "_plugins", {})
    if BACKEND_NAME.upper() in plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, create, devices=["cuda"])


_register()
