# SPDX-License-Identifier: BSD-3-Clause
"""The torch.distributed backend "p2pkit" (the C++ backend, p2pkit._c10d) on
GPUs; scripts/device/torch.sh runs it against the installed wheel. Needs
torch with CUDA; with fewer GPUs than ranks the ranks share GPUs
(P2PKIT_SHARE_GPUS=1; the calls p2pkit hands NCCL, the types only NCCL
has, run with NCCL_HOSTID set per rank, each rank a host of its own talking
over loopback sockets).

Each test starts its ranks as processes of this file (RANK, WORLD_SIZE,
MASTER_ADDR/PORT set, as torchrun would) and each rank runs a list of cases,
printing one line per case: "CASE <name> rank <r>: PASS" or "... FAIL: why".
Inputs are a function of (rank, size, type), so every rank computes the
host reference of every call itself.

  1-4 ranks (OneToFourRanks, one run per rank count)
             ops       every op x type x in place / out of place x
                       async_op, against the host reference
             graph     the ops captured in one CUDA graph, replayed with new
                       inputs; a captured all_reduce holds the nodes of the
                       same call made through p2pkit's C API, no more
             uneven    all_to_all_single with splits that differ on every
                       rank, zeros among them; a rank giving no splits beside
                       ranks giving equal ones; all_to_all of lists
             p2p       isend/irecv ring and pairs of large messages both ways,
                       batch_isend_irecv (one group), gather, scatter, barrier
             seq       sequence numbers: one per collective, equal on every rank
  2 ranks (TwoRanks, one run)
             groups    split_group, new_group of all ranks (a split of the
                       default group) and of some, pg_options
             release   finished calls' tensors let go on the caller's thread,
                       none kept by the group
             error     ranks disagree: work.wait() raises naming the call, the
                       watchdog has aborted the group, later calls raise, the
                       default group works on
             timeout   a call held past the group's timeout= (the stream
                       blocked): the watchdog aborts the group, wait() raises
             funcol / compile / ddp / fsdp2 (as with NCCL)
  4 ranks    mesh      a 2x2 DeviceMesh, new_group([1, 3])

    python3 python/tests/test_torch_backend.py -v            (every test)
    CASES=ops,graph NRANKS=2 python3 python/tests/test_torch_backend.py Custom"""
import datetime
import os
import socket
import subprocess
import sys
import time
import traceback
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import torch
    NGPU = torch.cuda.device_count()
except ImportError:
    torch = None
    NGPU = 0

needs_gpu = unittest.skipUnless(torch is not None and NGPU >= 1, "needs torch with a CUDA GPU")
STEPS = 5

# --------------------------------------------------------------------- ranks --


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_ranks(case, n, cases, timeout=300, device_id=False, env=None):
    """Start n ranks of this file running `cases`; every rank must print PASS
    for every case. Output goes to stdout (the log), prefixed by rank."""
    port = _free_port()
    procs = []
    for r in range(n):
        e = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r % NGPU),
                 LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                 TORCH_BACKEND_TEST_WORKER="1", CASES=",".join(cases),
                 NCCL_HOSTID=f"p2pkit-host{r}", NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo",
                 TORCHELASTIC_RUN_ID=f"test-{port}", INIT_DEVICE_ID="1" if device_id else "0",
                 **(env or {}))
        if NGPU < n:
            e["P2PKIT_SHARE_GPUS"] = "1"
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs, deadline = [], time.time() + timeout
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += f"\nrank {r}: killed after {timeout} s (a hang)\n"
        outs.append((p.returncode, out))
    failed = []
    for r, (rc, out) in enumerate(outs):
        for line in out.splitlines():
            print(f"[{n} ranks, rank {r}] {line}")
        failed += [f"{c} (rank {r})" for c in cases if f"CASE {c} rank {r}: PASS" not in out]
        if rc != 0:
            failed.append(f"rank {r} exited {rc}")
    sys.stdout.flush()
    case.assertEqual(failed, [], f"{n} ranks: failed: " + ", ".join(failed))


@needs_gpu
class OneToFourRanks(unittest.TestCase):
    def test_matrix(self):
        for n in (1, 2, 3, 4):
            run_ranks(self, n, ["ops", "graph", "graph_nodes", "uneven", "p2p", "seq"], timeout=240,
                      device_id=True)


@needs_gpu
class TwoRanks(unittest.TestCase):
    def test_groups_training_watchdog(self):
        # error and timeout last: they abort groups of their own
        run_ranks(self, 2, ["groups", "release", "funcol", "compile", "ddp", "fsdp2", "error",
                            "timeout"],
                  timeout=300, device_id=True)


@needs_gpu
class FourRanks(unittest.TestCase):
    def test_device_mesh_2x2(self):
        run_ranks(self, 4, ["mesh"], device_id=True)


@needs_gpu
@unittest.skipUnless(os.environ.get("CASES"), "runs the cases named by CASES (and NRANKS)")
class Custom(unittest.TestCase):
    """CASES and NRANKS from the environment."""

    def test_cases(self):
        run_ranks(self, int(os.environ.get("NRANKS", "2")), os.environ["CASES"].split(","),
                  device_id=True)

# -------------------------------------------------------------- the worker --


def inp(r, n, dtype, dev, lo=0, span=8):
    """Rank r's input of n elements: small whole numbers lo..lo+span-1 (exact
    in every type)."""
    i = torch.arange(n, dtype=torch.int64)
    v = (i * (r + 3) + r * 5) % span + lo
    if dtype == torch.bool:
        return (v % 2 == 1).to(dev)
    if dtype.is_complex:
        return torch.complex(v.double(), (v + 1).double()).to(dtype).to(dev)
    return v.to(dtype).to(dev)


def reduce_ref(xs, op, ws):
    """The reduction of the CPU tensors xs (op: a ReduceOp or "premul")."""
    import torch.distributed as dist
    d = xs[0].dtype
    if d == torch.bool:
        s = torch.stack([x.to(torch.uint8) for x in xs])
        return (s.max(0).values if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX)
                else s.min(0).values).to(torch.bool)
    wide = torch.complex128 if d.is_complex else (torch.float64 if d.is_floating_point
                                                    else torch.int64)
    s = torch.stack([x.to(wide) for x in xs])
    if op == dist.ReduceOp.SUM:
        out = s.sum(0)
    elif op == dist.ReduceOp.PRODUCT:
        out = s.prod(0)
    elif op == dist.ReduceOp.MIN:
        out = s.min(0).values
    elif op == dist.ReduceOp.MAX:
        out = s.max(0).values
    elif op == dist.ReduceOp.AVG:
        out = s.sum(0) / ws if (d.is_floating_point or d.is_complex) else \
            torch.div(s.sum(0), ws, rounding_mode="trunc")
    else:  # premul_sum with 0.5
        out = (s * 0.5).sum(0)
    return out.to(d)


class Checker:
    def __init__(self, rank):
        self.rank, self.bad = rank, []

    def eq(self, what, got, want):
        got, want = got.detach().cpu(), want.detach().cpu()
        if got.shape != want.shape or got.dtype != want.dtype:
            self.bad.append(f"{what}: got {got.dtype}{tuple(got.shape)}, want "
                            f"{want.dtype}{tuple(want.shape)}")
            return
        if not torch.equal(got, want):
            diff = (got != want).reshape(-1).nonzero()
            i = diff[0].item()
            self.bad.append(f"{what}: {diff.numel()} elements differ; element {i} is "
                            f"{got.reshape(-1)[i].item()}, want {want.reshape(-1)[i].item()}")

    def close(self, what, got, want, tol):
        got, want = got.detach().float().cpu(), want.detach().float().cpu()
        err = (got - want).abs().max().item() if got.numel() else 0.0
        if not err <= tol:
            self.bad.append(f"{what}: differs by {err:.3g} (tolerance {tol:.3g})")

    def raises(self, what, exc, needle, fn):
        try:
            fn()
        except exc as e:
            if needle not in str(e):
                self.bad.append(f"{what}: raised, but without {needle!r}: {e}")
            return str(e)
        self.bad.append(f"{what}: did not raise {exc.__name__}")
        return ""


# Every type torch users reduce: p2pkit's own, the ones p2pkit hands NCCL
# (int8), bool and complex as ProcessGroupNCCL maps them.
REDUCE_TYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "bool",
                "int8", "complex64"]


def ops_of(dt):
    import torch.distributed as dist
    R = dist.ReduceOp
    if dt == torch.bool:
        return [R.SUM, R.MIN, R.MAX]
    if dt.is_complex:
        return [R.SUM, R.AVG, "premul"]
    ops = [R.SUM, R.MIN, R.MAX, R.PRODUCT, R.AVG]
    return ops + (["premul"] if dt.is_floating_point else [])


def case_ops(rank, ws, dev, ck):
    """Every op x type x in/out of place x async_op, against the host reference."""
    import torch.distributed as dist
    R = dist.ReduceOp
    n = 1001  # odd: no multiple of 16 bytes
    for name in REDUCE_TYPES:
        dt = getattr(torch, name)
        for async_op in (False, True):
            tag = f"{name} async={async_op} {ws} ranks"

            def done(w):
                if async_op:
                    w.wait()
            for op in ops_of(dt):
                lo, span = (1, 2) if op == R.PRODUCT else (0, 8)
                xs = [inp(r, n, dt, "cpu", lo, span) for r in range(ws)]
                real = dist._make_nccl_premul_sum(0.5) if op == "premul" else op
                t = xs[rank].to(dev)
                done(dist.all_reduce(t, op=real, async_op=async_op))
                ck.eq(f"all_reduce {op} {tag}", t, reduce_ref(xs, op, ws))
                for root in range(ws):
                    t = xs[rank].to(dev)
                    done(dist.reduce(t, root, op=real, async_op=async_op))
                    ck.eq(f"reduce {op} root {root} {tag}", t,
                          reduce_ref(xs, op, ws) if rank == root else xs[rank])
                ys = [inp(r, ws * n, dt, "cpu", lo, span) for r in range(ws)]
                want = reduce_ref(ys, op, ws)[rank * n:(rank + 1) * n]
                out = torch.empty(n, dtype=dt, device=dev)
                done(dist.reduce_scatter_tensor(out, ys[rank].to(dev), op=real, async_op=async_op))
                ck.eq(f"reduce_scatter_tensor {op} {tag}", out, want)
                y = ys[rank].to(dev)  # in place: the output is this rank's share of the input
                done(dist.reduce_scatter_tensor(y[rank * n:(rank + 1) * n], y, op=real,
                                                async_op=async_op))
                ck.eq(f"reduce_scatter_tensor in place {op} {tag}", y[rank * n:(rank + 1) * n], want)
                out = torch.empty(n, dtype=dt, device=dev)
                done(dist.reduce_scatter(out, list(ys[rank].to(dev).chunk(ws)), op=real,
                                         async_op=async_op))
                ck.eq(f"reduce_scatter (list) {op} {tag}", out, want)
            movement(rank, ws, dev, ck, dt, tag, async_op, done)
    # Shapes torch users pass: a transposed view, an empty tensor, lists of
    # unequal sizes.
    x = inp(rank, 64, torch.float32, dev).view(8, 8).t()
    xs = [inp(r, 64, torch.float32, "cpu").view(8, 8).t() for r in range(ws)]
    dist.all_reduce(x)
    ck.eq("all_reduce of a transposed view", x, reduce_ref(xs, R.SUM, ws))
    dist.all_reduce(torch.zeros(0, device=dev))
    sizes = [r + 1 for r in range(ws)]
    outs = [torch.zeros(s, device=dev) for s in sizes]
    dist.all_gather(outs, torch.full((sizes[rank],), float(rank), device=dev))
    for r in range(ws):
        ck.eq(f"all_gather of unequal sizes [{r}]", outs[r], torch.full((sizes[r],), float(r)))
    out = torch.zeros(sizes[rank], device=dev)
    dist.reduce_scatter(out, [torch.full((s,), float(rank + 1), device=dev) for s in sizes])
    ck.eq("reduce_scatter of unequal sizes", out,
          torch.full((sizes[rank],), float(ws * (ws + 1) // 2)))
    # The tensors of one call on two devices are refused before anything
    # moves (p2pkit would take the CPU input's pointer as the GPU's).
    ck.raises("all_gather_into_tensor of a CPU input into a CUDA output", ValueError,
              "the tensors are on", lambda: dist.all_gather_into_tensor(
                  torch.zeros(ws * 4, device=dev), torch.ones(4)))


def movement(rank, ws, dev, ck, dt, tag, async_op, done):
    """Broadcast, the all-gathers, all-to-all of one type, as bytes."""
    import torch.distributed as dist
    n = 1001
    xs = [inp(r, n, dt, "cpu") for r in range(ws)]
    x = xs[rank].to(dev)
    for root in range(ws):
        t = x.clone()
        done(dist.broadcast(t, root, async_op=async_op))
        ck.eq(f"broadcast root {root} {tag}", t, xs[root])
    big = torch.empty(ws * n, dtype=dt, device=dev)
    done(dist.all_gather_into_tensor(big, x, async_op=async_op))
    ck.eq(f"all_gather_into_tensor {tag}", big, torch.cat(xs))
    big = torch.zeros(ws * n, dtype=dt, device=dev)
    big[rank * n:(rank + 1) * n] = x
    done(dist.all_gather_into_tensor(big, big[rank * n:(rank + 1) * n], async_op=async_op))
    ck.eq(f"all_gather_into_tensor in place {tag}", big, torch.cat(xs))
    outs = [torch.empty_like(x) for _ in range(ws)]
    done(dist.all_gather(outs, x, async_op=async_op))
    for r in range(ws):
        ck.eq(f"all_gather[{r}] {tag}", outs[r], xs[r])
    ys = [inp(r, ws * 6, dt, "cpu") for r in range(ws)]
    out = torch.empty(ws * 6, dtype=dt, device=dev)
    done(dist.all_to_all_single(out, ys[rank].to(dev), async_op=async_op))
    ck.eq(f"all_to_all_single {tag}", out, torch.cat([ys[p][rank * 6:(rank + 1) * 6]
                                                      for p in range(ws)]))


def case_graph(rank, ws, dev, ck):
    """One CUDA graph holding an all-reduce, an all-gather, a reduce-scatter,
    a broadcast and an uneven all-to-all, replayed with new inputs; captured
    on the capturing stream (no Work events, nothing watched)."""
    import torch.distributed as dist
    n = 4096
    a, g_in, rs_in, b = (torch.zeros(k, device=dev) for k in (n, n, ws * n, n))
    g_out, rs_out = torch.zeros(ws * n, device=dev), torch.zeros(n, device=dev)
    sc = [(rank + p) % 3 for p in range(ws)]
    rc = [(p + rank) % 3 for p in range(ws)]
    a2a_in, a2a_out = torch.zeros(sum(sc), 5, device=dev), torch.zeros(sum(rc), 5, device=dev)
    dist.all_reduce(a)  # the communicator exists before capture
    torch.cuda.synchronize()
    graph, s = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.cuda.graph(graph):
        dist.all_reduce(a)
        dist.all_gather_into_tensor(g_out, g_in)
        dist.reduce_scatter_tensor(rs_out, rs_in)
        dist.broadcast(b, ws - 1)
        dist.all_to_all_single(a2a_out, a2a_in, rc, sc)
    torch.cuda.current_stream().wait_stream(s)
    for k in range(3):
        def val(r):
            return float(r + 1 + 10 * k)
        a.fill_(val(rank))
        g_in.fill_(val(rank))
        rs_in.fill_(val(rank))
        b.fill_(val(rank))
        a2a_in.copy_(torch.cat([torch.full((sc[p], 5), val(rank) * 100 + p) for p in range(ws)]).to(dev))
        graph.replay()
        torch.cuda.synchronize()
        total = sum(val(r) for r in range(ws))
        ck.eq(f"graph replay {k}: all_reduce", a, torch.full((n,), total))
        ck.eq(f"graph replay {k}: all_gather", g_out,
              torch.cat([torch.full((n,), val(r)) for r in range(ws)]))
        ck.eq(f"graph replay {k}: reduce_scatter", rs_out, torch.full((n,), total))
        ck.eq(f"graph replay {k}: broadcast", b, torch.full((n,), val(ws - 1)))
        want = torch.cat([torch.full(((p + rank) % 3, 5), val(p) * 100 + rank) for p in range(ws)])
        ck.eq(f"graph replay {k}: uneven all_to_all_single", a2a_out, want)


def graph_node_types(graph):
    """The node types (cudaGraphNodeType) of a kept CUDAGraph, in order,
    read with the CUDA runtime torch loaded."""
    import ctypes
    with open("/proc/self/maps") as f:
        path = next(ln.split()[-1] for ln in f if "libcudart.so" in ln)
    rt = ctypes.CDLL(path)
    g = ctypes.c_void_p(graph.raw_cuda_graph())
    n = ctypes.c_size_t(0)
    assert rt.cudaGraphGetNodes(g, None, ctypes.byref(n)) == 0
    nodes = (ctypes.c_void_p * n.value)()
    assert rt.cudaGraphGetNodes(g, nodes, ctypes.byref(n)) == 0
    types = []
    for i in range(n.value):
        t = ctypes.c_int(-1)
        assert rt.cudaGraphNodeGetType(ctypes.c_void_p(nodes[i]), ctypes.byref(t)) == 0
        types.append(t.value)
    return sorted(types)


def case_graph_nodes(rank, ws, dev, ck):
    """An all_reduce captured through the backend holds exactly the nodes
    of one captured through p2pkit's C API (p2pkit.all_reduce on a
    communicator of the same ranks): no copy, event or launch of its own."""
    import torch.distributed as dist
    import p2pkit
    box = [p2pkit.get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    comm = p2pkit.Comm(unique_id=box[0], rank=rank, world_size=ws, device=dev.index)
    t = torch.ones(1 << 16, device=dev)
    dist.all_reduce(t)
    p2pkit.all_reduce(t, op="sum", comm=comm)
    torch.cuda.synchronize()
    types = []
    for how in ("backend", "C API"):
        graph, s = torch.cuda.CUDAGraph(keep_graph=True), torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            graph.capture_begin()
            if how == "backend":
                dist.all_reduce(t)
            else:
                p2pkit.all_reduce(t, op="sum", comm=comm, stream=s.cuda_stream)
            graph.capture_end()
        torch.cuda.current_stream().wait_stream(s)
        types.append(graph_node_types(graph))
    if types[0] != types[1] or (ws > 1 and not types[0]):  # one rank in place: nothing to do
        ck.bad.append(f"captured all_reduce: the backend's graph has nodes {types[0]}, the C "
                      f"API's {types[1]}")
    print(f"  captured all_reduce: {len(types[0])} node(s) either way (types {types[0]})")
    comm.close()


def case_uneven(rank, ws, dev, ck):
    """all_to_all_single with splits that differ on every rank, zeros among
    them, several rounds; equal splits given by some ranks only; lists."""
    import torch.distributed as dist
    for k in range(3):
        def rows(src, dst):
            return 0 if (src + 2 * dst + k) % 3 == 0 else (src * 5 + dst * 3 + k) % 7 + 1
        sc = [rows(rank, p) for p in range(ws)]
        rc = [rows(p, rank) for p in range(ws)]
        x = torch.cat([torch.full((sc[p], 3), 1000.0 * rank + 10 * p + k) for p in range(ws)])
        out = torch.full((sum(rc), 3), -1.0, device=dev)
        w = dist.all_to_all_single(out, x.to(dev), rc, sc, async_op=bool(k % 2))
        if w is not None:
            w.wait()
        want = torch.cat([torch.full((rc[p], 3), 1000.0 * p + 10 * rank + k) for p in range(ws)])
        ck.eq(f"uneven all_to_all_single round {k} (sends {sc}, receives {rc})", out, want)
    # Equal shares, given by rank 0 only: every rank still takes one path.
    x = torch.arange(ws * 4, dtype=torch.float32, device=dev) + 100 * rank
    out = torch.empty_like(x)
    splits = [4] * ws if rank == 0 else None
    dist.all_to_all_single(out, x, splits, splits)
    ck.eq("all_to_all_single, equal splits from rank 0 only", out,
          torch.cat([torch.arange(rank * 4, rank * 4 + 4, dtype=torch.float32) + 100 * p
                     for p in range(ws)]))
    ins = [torch.full((rank + p + 1,), float(10 * rank + p), device=dev) for p in range(ws)]
    outs = [torch.zeros(p + rank + 1, device=dev) for p in range(ws)]
    dist.all_to_all(outs, ins)
    for p in range(ws):
        ck.eq(f"all_to_all (lists of unequal sizes)[{p}]", outs[p],
              torch.full((p + rank + 1,), float(10 * p + rank)))


def case_p2p(rank, ws, dev, ck):
    """Sends and receives: alone (isend then irecv, large, between every
    pair: each on its own stream, so neither waits for the other), in one
    batch_isend_irecv (one p2pkit group), gather, scatter, barrier."""
    import torch.distributed as dist
    big = 1 << 22  # 16 MiB of float32: more than a landing slot holds
    nxt, prv = (rank + 1) % ws, (rank - 1) % ws
    if ws > 1:
        x = torch.full((big,), float(rank), device=dev)
        out = torch.zeros(big, device=dev)
        reqs = [dist.isend(x, nxt), dist.irecv(out, prv)]
        for q in reqs:
            q.wait()
        ck.eq("isend + irecv ring, 16 MiB", out, torch.full((big,), float(prv)))
        outs = [torch.zeros(1000 + p, device=dev) for p in range(ws)]
        ops = [dist.P2POp(dist.isend, torch.full((1000 + rank,), float(rank), device=dev), p)
               for p in range(ws) if p != rank]
        ops += [dist.P2POp(dist.irecv, outs[p], p) for p in range(ws) if p != rank]
        for q in dist.batch_isend_irecv(ops):
            q.wait()
        for p in range(ws):
            if p != rank:
                ck.eq(f"batch_isend_irecv from {p}", outs[p], torch.full((1000 + p,), float(p)))
    for root in range(ws):
        x = torch.full((777,), float(rank + 1), device=dev)
        gl = [torch.zeros(777, device=dev) for _ in range(ws)] if rank == root else None
        dist.gather(x, gl, dst=root)
        if rank == root:
            for r in range(ws):
                ck.eq(f"gather root {root} [{r}]", gl[r], torch.full((777,), float(r + 1)))
        out = torch.zeros(555, device=dev)
        sl = [torch.full((555,), float(10 * root + r), device=dev) for r in range(ws)] \
            if rank == root else None
        dist.scatter(out, sl, src=root)
        ck.eq(f"scatter root {root}", out, torch.full((555,), float(10 * root + rank)))
    dist.barrier()


def case_seq(rank, ws, dev, ck):
    """One sequence number per collective, the same on every rank; a
    synchronous collective returns no Work (it ran on the caller's stream),
    an asynchronous one does, and its block_current_stream() orders the
    current stream after it."""
    import torch.distributed as dist
    b = dist.group.WORLD._get_backend(torch.device("cuda"))
    opts = dist.AllreduceOptions()
    opts.asyncOp = False
    if b.allreduce([torch.ones(4, device=dev)], opts) is not None:
        ck.bad.append("a synchronous all_reduce returned a Work")
    opts.asyncOp = True
    w = b.allreduce([torch.ones(4, device=dev)], opts)
    if w is None:
        ck.bad.append("an asynchronous all_reduce returned no Work")
    else:
        w.wait()
    # block_current_stream orders the current stream after the call, as
    # wait() does: a read on another stream sees the call's result, not
    # the tensor before the caller's stream (held by a sleep) reached it.
    t = torch.ones(1024, device=dev)
    torch.cuda.synchronize()
    torch.cuda._sleep(int(1e9))  # about half a second on the caller's stream
    t.fill_(3.0)
    w = dist.all_reduce(t, async_op=True)
    side = torch.cuda.Stream(dev)
    with torch.cuda.stream(side):
        w.block_current_stream()
        got = t.cpu()
    ck.eq("block_current_stream, then a read on another stream", got, torch.full((1024,), 3.0 * ws))
    torch.cuda.synchronize()
    s0 = b._get_sequence_number_for_group()
    for _ in range(5):
        dist.all_reduce(torch.ones(4, device=dev))
    s1 = b._get_sequence_number_for_group()
    if s1 - s0 != 5:
        ck.bad.append(f"sequence number went from {s0} to {s1} over 5 all-reduces")
    seen = [None] * ws
    dist.all_gather_object(seen, s1)
    if len(set(seen)) != 1:
        ck.bad.append(f"sequence numbers differ between ranks: {seen}")


def case_groups(rank, ws, dev, ck):
    """split_group (p2pkit_comm_split), new_group of every rank (a split of
    the default group) and of one, pg_options."""
    import torch.distributed as dist
    from p2pkit import torch_backend as tb
    world = dist.group.WORLD._get_backend(torch.device("cuda"))
    sub = dist.split_group(split_ranks=[[r] for r in range(ws)])
    t = torch.full((10,), float(rank + 1), device=dev)
    dist.all_reduce(t, group=sub)
    ck.eq("split_group of one rank each: all_reduce", t, torch.full((10,), float(rank + 1)))
    if world.comm_split_count() != 1:
        ck.bad.append(f"comm_split_count {world.comm_split_count()}, want 1")
    everyone = dist.new_group(list(range(ws)), pg_options=tb.Options(max_blocks=4))
    b = everyone._get_backend(torch.device("cuda"))
    if b._device != dev.index:
        ck.bad.append("new_group of every rank: no communicator yet (not split from the default)")
    t = torch.full((10,), float(rank + 1), device=dev)
    dist.all_reduce(t, group=everyone)
    ck.eq("new_group of every rank: all_reduce", t, torch.full((10,), float(ws * (ws + 1) // 2)))
    if b.options.max_blocks != 4:
        ck.bad.append(f"pg_options: max_blocks {b.options.max_blocks}")
    one = dist.new_group([ws - 1])
    if rank == ws - 1:
        t = torch.ones(3, device=dev)
        dist.all_reduce(t, group=one)
        ck.eq("new_group([last]): all_reduce", t, torch.ones(3))


def case_error(rank, ws, dev, ck):
    """Ranks disagree (float32 against int32): work.wait() raises, naming
    the call; the watchdog (P2PKIT_TORCH_ASYNC_ERROR_HANDLING=2) aborts the
    group's communicator; later calls raise naming the abort; the default
    group works on."""
    import torch.distributed as dist
    g = dist.new_group()
    b = g._get_backend(torch.device("cuda"))
    dist.all_reduce(torch.ones(4096, device=dev), group=g)
    bad = torch.ones(4096, dtype=torch.float32 if rank == 0 else torch.int32, device=dev)
    work = dist.all_reduce(bad, group=g, async_op=True)
    torch.cuda.synchronize()
    for _ in range(100):  # the watchdog sweeps every 100 ms
        if b._async_error():
            break
        time.sleep(0.05)
    msg = ck.raises("work.wait() after the ranks disagreed", dist.DistBackendError,
                    "all_reduce", work.wait)
    print(f"  work.wait() raised: {msg}")
    msg = ck.raises("the next call", dist.DistBackendError, "aborted",
                    lambda: dist.broadcast(torch.ones(8, device=dev), 0, group=g))
    print(f"  the next call raised: {msg}")
    t = torch.ones(10, device=dev)
    dist.all_reduce(t)
    ck.eq("default group after the error", t, torch.full((10,), float(ws)))


def case_timeout(rank, ws, dev, ck):
    """A call held past the group's timeout= on the GPU (its stream waits
    behind a long kernel): the watchdog aborts the group; wait() raises
    naming the timeout."""
    import torch.distributed as dist
    g = dist.new_group(timeout=datetime.timedelta(seconds=2))
    dist.all_reduce(torch.ones(4, device=dev), group=g)
    torch.cuda.synchronize()
    t0 = time.time()
    torch.cuda._sleep(int(6e9))  # about 3-4 s of a spinning kernel on the current stream
    work = dist.all_reduce(torch.ones(4, device=dev), group=g, async_op=True)
    b = g._get_backend(torch.device("cuda"))
    while time.time() - t0 < 15 and "timeout" not in b._async_error():
        time.sleep(0.1)
    took = time.time() - t0
    msg = ck.raises("work.wait() after the timeout", dist.DistBackendError, "timeout", work.wait)
    print(f"  after {took:.1f} s: {msg}")
    if not 1.5 < took < 10:
        ck.bad.append(f"the watchdog acted after {took:.1f} s (timeout 2 s)")
    torch.cuda.synchronize()


def case_release(rank, ws, dev, ck):
    """The tensors of finished asynchronous calls whose Works were dropped
    are let go on the caller's thread at the group's next call, never on
    the watchdog's (a tensor's Python object, or an autograd graph with
    Python in it, takes the GIL as it goes), and the group keeps none of
    them after it (each lane's last call is dropped once done)."""
    import threading
    import weakref
    import torch.distributed as dist
    g = dist.new_group()
    dist.all_reduce(torch.ones(8, device=dev), group=g)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated(dev)
    freed = []  # the thread each tensor's Python object ended on

    def call():
        x = torch.ones(1 << 22, device=dev)  # 16 MiB
        weakref.finalize(x, lambda: freed.append(threading.get_ident()))
        return dist.all_reduce(x, group=g, async_op=True)  # the Work keeps x

    works = [call(), call()]
    for w in works:
        w.wait()
    torch.cuda.synchronize()
    del works, w
    time.sleep(0.5)  # the watchdog sweeps every 100 ms and finds both done
    dist.all_reduce(torch.ones(8, device=dev), group=g)
    torch.cuda.synchronize()
    main = threading.get_ident()
    where = ["the caller's" if t == main else "another (the watchdog's)" for t in freed]
    if where != ["the caller's"] * 2:
        ck.bad.append(f"the two all-reduces' tensors went on these threads: {where} (want the "
                      f"caller's, at its next call)")
    if torch.cuda.memory_allocated(dev) != base:
        ck.bad.append(f"{torch.cuda.memory_allocated(dev) - base} bytes still allocated after the "
                      f"calls finished and their Works went")


def case_funcol(rank, ws, dev, ck):
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    x = torch.full((1000,), float(rank + 1), device=dev)
    y = funcol.all_reduce(x, "sum", dist.group.WORLD)
    ck.eq("funcol all_reduce", funcol.wait_tensor(y) if hasattr(funcol, "wait_tensor") else y,
          torch.full((1000,), float(sum(range(1, ws + 1)))))
    g = funcol.all_gather_tensor(x, 0, dist.group.WORLD)
    ck.eq("funcol all_gather_tensor", g * 1, torch.cat([torch.full((1000,), float(r + 1))
                                                        for r in range(ws)]))
    rs = funcol.reduce_scatter_tensor(torch.cat([x] * ws), "sum", 0, dist.group.WORLD)
    ck.eq("funcol reduce_scatter_tensor", rs * 1, torch.full((1000,), float(sum(range(1, ws + 1)))))


def case_compile(rank, ws, dev, ck):
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    @torch.compile
    def step(x):
        return funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1
    out = step(torch.full((1024,), float(rank + 1), device=dev))
    ck.eq("torch.compile'd all_reduce", out,
          torch.full((1024,), float(2 * sum(range(1, ws + 1)) + 1)))


class _Net(torch.nn.Module if torch is not None else object):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 256)
        self.b = torch.nn.Linear(256, 256)
        self.c = torch.nn.Linear(256, 10)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def _batches(rank, dev, steps=STEPS):
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(16, 64, generator=g).to(dev), torch.randint(0, 10, (16,), generator=g).to(dev))
            for _ in range(steps)]


def case_ddp(rank, ws, dev, ck):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ref = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    gpu = DDP(_Net().to(dev), device_ids=[dev.index], bucket_cap_mb=0.1)  # several buckets
    torch.manual_seed(0)
    cpu = DDP(_Net(), process_group=ref, bucket_cap_mb=0.1)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (gpu, cpu)]
    for step, (x, y) in enumerate(_batches(rank, dev)):
        losses = []
        for m, opt, d in zip((gpu, cpu), opts, (dev, torch.device("cpu"))):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(m(x.to(d)), y.to(d))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if abs(losses[0] - losses[1]) > 1e-4 * max(1.0, abs(losses[1])):
            ck.bad.append(f"DDP step {step}: loss {losses[0]:.6f} (p2pkit) vs {losses[1]:.6f} (gloo)")
    for (name, a), b in zip(gpu.module.named_parameters(), cpu.module.parameters()):
        ck.close(f"DDP parameter {name} after {STEPS} steps", a, b, 2e-4)
    print(f"  ddp: {STEPS} steps, last loss {losses[0]:.6f} (p2pkit) {losses[1]:.6f} (gloo)")


def case_fsdp2(rank, ws, dev, ck):
    import torch.distributed as dist
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh
    torch.backends.cuda.matmul.allow_tf32 = False
    mesh = init_device_mesh("cuda", (ws,))
    torch.manual_seed(0)
    model = _Net().to(dev)
    torch.manual_seed(0)
    local = _Net().to(dev)  # one process, every rank's batch at once
    for m in (model.a, model.b, model.c):
        fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lopt = torch.optim.SGD(local.parameters(), lr=0.1)
    everyone = [_batches(r, dev) for r in range(ws)]
    for step in range(STEPS):
        x, y = everyone[rank][step]
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        lx = torch.cat([everyone[r][step][0] for r in range(ws)])
        ly = torch.cat([everyone[r][step][1] for r in range(ws)])
        lopt.zero_grad(set_to_none=True)
        lloss = torch.nn.functional.cross_entropy(local(lx), ly)
        lloss.backward()
        lopt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        if abs(mean.item() - lloss.item()) > 1e-4 * max(1.0, abs(lloss.item())):
            ck.bad.append(f"FSDP2 step {step}: mean loss {mean.item():.6f} vs {lloss.item():.6f} "
                          f"(one process)")
    for (name, p), q in zip(model.named_parameters(), local.parameters()):
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        ck.close(f"FSDP2 parameter {name} after {STEPS} steps", full, q, 2e-4)
    print(f"  fsdp2: {STEPS} steps, last mean loss {mean.item():.6f}, one process "
          f"{lloss.item():.6f}")


def case_mesh(rank, ws, dev, ck):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    coords = {r: divmod(r, 2) for r in range(ws)}  # rank -> (dp, tp)
    me = coords[rank]
    for dim, name in ((0, "dp"), (1, "tp")):
        g = mesh.get_group(name)
        peers = [r for r in range(ws) if all(coords[r][k] == me[k] for k in (0, 1) if k != dim)]
        t = torch.full((333,), float(rank + 1), device=dev)
        dist.all_reduce(t, group=g)
        ck.eq(f"mesh {name} all_reduce", t, torch.full((333,), float(sum(r + 1 for r in peers))))
        outs = [torch.zeros(7, device=dev) for _ in peers]
        dist.all_gather(outs, torch.full((7,), float(rank), device=dev), group=g)
        for o, r in zip(outs, peers):
            ck.eq(f"mesh {name} all_gather from {r}", o, torch.full((7,), float(r)))
    sub = dist.new_group([1, 3])
    if rank in (1, 3):
        t = torch.full((5,), float(rank), device=dev)
        dist.all_reduce(t, group=sub)
        ck.eq("new_group([1, 3]) all_reduce", t, torch.full((5,), 4.0))
    t = torch.full((5,), 1.0, device=dev)
    dist.all_reduce(t)
    ck.eq("world all_reduce after sub-groups", t, torch.full((5,), float(ws)))


CASES = {"ops": case_ops, "graph": case_graph, "graph_nodes": case_graph_nodes,
         "uneven": case_uneven, "p2p": case_p2p,
         "seq": case_seq, "groups": case_groups, "release": case_release, "error": case_error,
         "timeout": case_timeout,
         "funcol": case_funcol, "compile": case_compile, "ddp": case_ddp, "fsdp2": case_fsdp2,
         "mesh": case_mesh}


def worker():
    import torch.distributed as dist
    import p2pkit
    from p2pkit import torch_backend as tb
    rank, ws = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    if not tb.available():
        print(f"rank {rank}: {tb.why_unavailable()}")
        sys.exit(1)
    kw = {"device_id": dev} if os.environ.get("INIT_DEVICE_ID") == "1" else {}
    dist.init_process_group("cpu:gloo,cuda:p2pkit", **kw)
    print(f"rank {rank}: {type(dist.group.WORLD._get_backend(dev)).__name__}, library "
          f"{p2pkit.library_path()}", flush=True)
    for name in os.environ["CASES"].split(","):
        ck = Checker(rank)
        t0 = time.time()
        try:
            CASES[name](rank, ws, dev, ck)
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 -- reported as this case's failure
            ck.bad.append("raised:\n" + traceback.format_exc())
        took = time.time() - t0
        if ck.bad:
            print(f"CASE {name} rank {rank}: FAIL ({took:.1f} s): {len(ck.bad)} problem(s)")
            for b in ck.bad[:20]:
                print(f"    {b}")
        else:
            print(f"CASE {name} rank {rank}: PASS ({took:.1f} s)", flush=True)
        sys.stdout.flush()
    try:
        dist.barrier()
        dist.destroy_process_group()
        print(f"rank {rank}: destroy_process_group: done")
    except Exception as e:  # noqa: BLE001
        print(f"rank {rank}: teardown: {e}")


if __name__ == "__main__":
    if os.environ.get("TORCH_BACKEND_TEST_WORKER") == "1":
        worker()
    else:
        unittest.main()
