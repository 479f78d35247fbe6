"""The torch.distributed backend "p2pkit" on GPUs (scripts/device/torch.sh runs
it). Needs torch with CUDA; with fewer GPUs than ranks the ranks share GPUs
(P2PKIT_SHARE_GPUS=1; NCCL cannot share one, so results are compared with
gloo on CPU copies, and the calls handed to NCCL run with NCCL_HOSTID set
per rank, each rank a host of its own talking over loopback sockets).

Each test starts its ranks as processes of this file (RANK, WORLD_SIZE,
MASTER_ADDR/PORT set, as torchrun would) and each rank runs a list of cases,
printing one line per case: "CASE <name> rank <r>: PASS" or "... FAIL: why".

  2 ranks  ops        every op x dtype x async_op against gloo (CPU copies)
           nccl_fallback   int8 all-reduce and uneven all-to-all through NCCL
           funcol     functional collectives (what torch.compile emits), eager
           compile    a torch.compile'd function with an all-reduce in it
           graph      an all-reduce captured in a CUDA graph, replayed
           ddp        DDP for 5 steps: losses and parameters as DDP on gloo/CPU
           fsdp2      fully_shard for 5 steps: as one process on the whole batch
           async_error  ranks disagree (float32 vs int32): work.wait() and the
                      next call raise P2PKitError naming the call; abort()
                      ends the group and later calls are refused
  4 ranks  mesh       a 2x2 DeviceMesh: all-reduce and all-gather in each
                      dimension's sub-group, new_group of ranks {1, 3}
                      (init_process_group with device_id=, torch's eager form)

    python3 python/tests/test_torch_backend.py -v        (the tests)
    CASES=ops,graph python3 python/tests/test_torch_backend.py   (some cases)"""
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


def run_ranks(case, n, cases, timeout=300, device_id=False):
    """Start n ranks of this file running `cases`; every rank must print PASS
    for every case. Output goes to stdout (the log), prefixed by rank.
    device_id: init_process_group(..., device_id=) (torch's eager form)."""
    port = _free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r % NGPU),
                   LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCH_BACKEND_TEST_WORKER="1", CASES=",".join(cases), NCCL_HOSTID=f"p2pkit-host{r}",
                   NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo",
                   TORCHELASTIC_RUN_ID=f"test-{port}", INIT_DEVICE_ID="1" if device_id else "0")
        if NGPU < n:
            env["P2PKIT_SHARE_GPUS"] = "1"
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env,
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
            print(f"[rank {r}] {line}")
        for c in cases:
            if f"CASE {c} rank {r}: PASS" not in out:
                failed.append(f"{c} (rank {r})")
        if rc != 0:
            failed.append(f"rank {r} exited {rc}")
    sys.stdout.flush()
    case.assertEqual(failed, [], "failed: " + ", ".join(failed))


@needs_gpu
class TwoRanks(unittest.TestCase):
    def test_ops_against_gloo(self):
        run_ranks(self, 2, ["ops"], timeout=400)

    def test_nccl_fallback_funcol_graph(self):
        run_ranks(self, 2, ["nccl_fallback", "funcol", "compile", "graph"])

    def test_ddp_and_fsdp2(self):
        run_ranks(self, 2, ["ddp", "fsdp2"])

    def test_async_error(self):
        run_ranks(self, 2, ["async_error"])


@needs_gpu
class FourRanks(unittest.TestCase):
    def test_device_mesh_2x2(self):
        run_ranks(self, 4, ["mesh"], device_id=True)

# -------------------------------------------------------------- the worker --


def inp(r, n, dtype, dev, lo=0, span=8):
    """Rank r's input: small integers lo..lo+span-1 (exact in every type)."""
    i = torch.arange(n, dtype=torch.int64)
    v = (i * (r + 3) + r * 5) % span + lo
    if dtype == torch.bool:
        return (v % 2 == 1).to(dev)
    if dtype.is_complex:
        return torch.complex(v.double(), (v + 1).double()).to(dtype).to(dev)
    return v.to(dtype).to(dev)


def cpu_all(t, ws, ref):
    """Every rank's tensor, gathered with gloo on CPU copies (as bytes, so
    every type goes)."""
    c = t.detach().cpu().contiguous()
    b = c.reshape(-1).view(torch.uint8)
    outs = [torch.empty_like(b) for _ in range(ws)]
    torch.distributed.all_gather(outs, b, group=ref)
    return [o.view(c.dtype).reshape(c.shape) for o in outs]


def reduce_ref(xs, op):
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
        out = s.sum(0) / len(xs) if (d.is_floating_point or d.is_complex) else \
            torch.div(s.sum(0), len(xs), rounding_mode="trunc")
    else:  # premul_sum with 0.5
        out = (s * 0.5).sum(0)
    return out.to(d)


class Checker:
    def __init__(self, rank):
        self.rank, self.bad = rank, []

    def eq(self, what, got, want):
        got = got.detach().cpu()
        want = want.detach().cpu()
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


def case_ops(rank, ws, dev, ck):
    import torch.distributed as dist
    ref = dist.new_group(backend="gloo")
    R = dist.ReduceOp
    n = 1001  # odd: no multiple of 16 bytes
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
              torch.int64, torch.uint8, torch.bool, torch.int8, torch.complex64]
    for dt in dtypes:
        name = str(dt).replace("torch.", "")
        for async_op in (False, True):
            tag = f"{name} async={async_op}"

            def done(w, t=None):
                if async_op:
                    w.wait()
                return t
            ops = [R.SUM, R.MIN, R.MAX, R.PRODUCT, R.AVG, "premul"]
            if dt == torch.bool:
                ops = [R.SUM, R.MIN, R.MAX]
            if dt.is_complex:
                ops = [R.SUM, R.AVG, "premul"]
            if dt in (torch.int8,):
                ops = [R.SUM, R.MAX]
            if not dt.is_floating_point and not dt.is_complex:
                ops = [o for o in ops if o != "premul"]
            for op in ops:
                lo, span = (1, 2) if op == R.PRODUCT else (0, 8)
                x = inp(rank, n, dt, dev, lo, span)
                xs = cpu_all(x, ws, ref)
                real = dist._make_nccl_premul_sum(0.5) if op == "premul" else op
                t = x.clone()
                done(dist.all_reduce(t, op=real, async_op=async_op))
                ck.eq(f"all_reduce {op} {tag}", t, reduce_ref(xs, op))
            if dt in (torch.float32, torch.int32) and not async_op:
                # gloo's own all-reduce of the CPU copies, as a second reference
                x = inp(rank, n, dt, dev)
                c = x.cpu()
                dist.all_reduce(c, group=ref)
                t = x.clone()
                dist.all_reduce(t)
                ck.eq(f"all_reduce vs gloo {tag}", t, c)
            x = inp(rank, n, dt, dev)
            xs = cpu_all(x, ws, ref)
            for root in range(ws):
                t = x.clone()
                done(dist.broadcast(t, root, async_op=async_op))
                ck.eq(f"broadcast root {root} {tag}", t, xs[root])
                if dt not in (torch.int8,) and not dt.is_complex:
                    t = x.clone()
                    done(dist.reduce(t, root, op=R.SUM, async_op=async_op))
                    ck.eq(f"reduce root {root} {tag}", t,
                          reduce_ref(xs, R.SUM) if rank == root else x)
            outs = [torch.full_like(x, 3) for _ in range(ws)]
            done(dist.all_gather(outs, x, async_op=async_op))
            for r in range(ws):
                ck.eq(f"all_gather[{r}] {tag}", outs[r], xs[r])
            big = torch.empty(ws * n, dtype=dt, device=dev)
            done(dist.all_gather_into_tensor(big, x, async_op=async_op))
            ck.eq(f"all_gather_into_tensor {tag}", big, torch.cat(xs))
            if dt not in (torch.int8,):
                y = inp(rank, ws * n, dt, dev)
                ys = cpu_all(y, ws, ref)
                want = reduce_ref(ys, R.SUM)[rank * n:(rank + 1) * n]
                out = torch.empty(n, dtype=dt, device=dev)
                done(dist.reduce_scatter_tensor(out, y, async_op=async_op))
                ck.eq(f"reduce_scatter_tensor {tag}", out, want)
                out = torch.empty(n, dtype=dt, device=dev)
                done(dist.reduce_scatter(out, list(y.chunk(ws)), async_op=async_op))
                ck.eq(f"reduce_scatter (list) {tag}", out, want)
                if dt.is_floating_point:
                    out = torch.empty(n, dtype=dt, device=dev)
                    done(dist.reduce_scatter_tensor(out, y, op=R.AVG, async_op=async_op))
                    ck.eq(f"reduce_scatter_tensor AVG {tag}", out,
                          reduce_ref(ys, R.AVG)[rank * n:(rank + 1) * n])
            y = inp(rank, ws * 6, dt, dev)
            ys = cpu_all(y, ws, ref)
            out = torch.empty_like(y)
            done(dist.all_to_all_single(out, y, async_op=async_op))
            ck.eq(f"all_to_all_single {tag}", out, torch.cat([ys[p][rank * 6:(rank + 1) * 6]
                                                              for p in range(ws)]))
            outs = [torch.empty(6, dtype=dt, device=dev) for _ in range(ws)]
            done(dist.all_to_all(outs, list(y.chunk(ws)), async_op=async_op))
            for p in range(ws):
                ck.eq(f"all_to_all (list)[{p}] {tag}", outs[p], ys[p][rank * 6:(rank + 1) * 6])
            # send/recv: a ring as isend + irecv (each rank sends and receives).
            out = torch.full_like(x, 3)
            reqs = [dist.isend(x, (rank + 1) % ws), dist.irecv(out, (rank - 1) % ws)]
            for q in reqs:
                q.wait()
            ck.eq(f"isend/irecv ring {tag}", out, xs[(rank - 1) % ws])
            out = torch.full_like(x, 3)
            ops_ = [dist.P2POp(dist.isend, x, (rank + 1) % ws),
                    dist.P2POp(dist.irecv, out, (rank - 1) % ws)]
            for q in dist.batch_isend_irecv(ops_):
                q.wait()
            ck.eq(f"batch_isend_irecv ring {tag}", out, xs[(rank - 1) % ws])
            if not async_op:
                if rank == 0:
                    gl = [torch.full_like(x, 3) for _ in range(ws)]
                    dist.gather(x, gl, dst=0)
                    for r in range(ws):
                        ck.eq(f"gather[{r}] {tag}", gl[r], xs[r])
                else:
                    dist.gather(x, dst=0)
                out = torch.full_like(x, 3)
                dist.scatter(out, [inp(p, n, dt, dev) for p in range(ws)] if rank == 1 else None,
                             src=1)
                ck.eq(f"scatter {tag}", out, inp(rank, n, dt, dev))
    # Non-contiguous tensors, CPU tensors (gloo), objects, a barrier.
    x = inp(rank, 64, torch.float32, dev).view(8, 8).t()
    xs = cpu_all(x.contiguous(), ws, ref)
    dist.all_reduce(x)
    ck.eq("all_reduce non-contiguous", x, reduce_ref(xs, R.SUM))
    c = torch.full((5,), float(rank + 1))
    dist.all_reduce(c)
    ck.eq("all_reduce of a CPU tensor (gloo)", c, torch.full((5,), float(sum(range(1, ws + 1)))))
    objs = [None] * ws
    dist.all_gather_object(objs, {"rank": rank})
    if objs != [{"rank": r} for r in range(ws)]:
        ck.bad.append(f"all_gather_object: {objs}")
    dist.barrier()
    t = torch.zeros(0, device=dev)
    dist.all_reduce(t)  # empty: a no-op


def case_nccl_fallback(rank, ws, dev, ck):
    import warnings
    import torch.distributed as dist
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        t = torch.full((100,), rank + 1, dtype=torch.int8, device=dev)
        dist.all_reduce(t)
        ck.eq("int8 all_reduce (NCCL)", t, torch.full((100,), sum(range(1, ws + 1)),
                                                     dtype=torch.int8))
        # Uneven all-to-all: rank r sends r+1+p elements to rank p.
        ins = [torch.full((rank + 1 + p,), 10 * rank + p, dtype=torch.float32, device=dev)
               for p in range(ws)]
        out_sizes = [q + 1 + rank for q in range(ws)]
        out = torch.empty(sum(out_sizes), device=dev)
        dist.all_to_all_single(out, torch.cat(ins), out_sizes, [t.numel() for t in ins])
        want = torch.cat([torch.full((q + 1 + rank,), 10 * q + rank, dtype=torch.float32)
                          for q in range(ws)])
        ck.eq("uneven all_to_all_single (NCCL)", out, want)
    said = " | ".join(str(w.message) for w in got)
    if "handed to NCCL" not in said:
        ck.bad.append(f"no warning naming NCCL: {said!r}")


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


def case_graph(rank, ws, dev, ck):
    import torch.distributed as dist
    src = torch.zeros(4096, device=dev)
    t = torch.zeros(4096, device=dev)
    dist.all_reduce(t)  # the communicator exists before capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            t.copy_(src)
            dist.all_reduce(t)
            t.mul_(2)
    torch.cuda.current_stream().wait_stream(s)
    for k in range(3):
        src.fill_(float(rank + 1 + k))
        g.replay()
        torch.cuda.synchronize()
        want = 2 * sum(r + 1 + k for r in range(ws))
        ck.eq(f"graph replay {k}", t, torch.full((4096,), float(want)))


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
        # the mean of the ranks' losses is the whole batch's loss
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


def case_async_error(rank, ws, dev, ck):
    import p2pkit
    import torch.distributed as dist
    g = dist.new_group()  # a communicator of its own: this one gets broken
    t = torch.ones(4096, device=dev)
    dist.all_reduce(t, group=g)  # made and working
    bad = torch.ones(4096, dtype=torch.float32 if rank == 0 else torch.int32, device=dev)
    work = dist.all_reduce(bad, group=g, async_op=True)
    torch.cuda.synchronize()
    for _ in range(100):  # the device tells the host soon after the kernel ran
        if g._comm.async_error() is not None:
            break
        time.sleep(0.05)
    try:
        work.wait()
        ck.bad.append("work.wait() returned normally after the ranks disagreed")
    except p2pkit.P2PKitError as e:
        if "work.wait()" not in str(e) or "all_reduce" not in str(e):
            ck.bad.append(f"work.wait()'s error does not name the call: {e}")
        print(f"  work.wait() raised: {e}")
    try:
        dist.broadcast(t, 0, group=g)
        ck.bad.append("the next call returned normally")
    except p2pkit.P2PKitError as e:
        if "broadcast" not in str(e):
            ck.bad.append(f"the next call's error does not name it: {e}")
        print(f"  next call raised: {e}")
    # A watchdog's way out: abort gives the broken group up without its
    # peers, ends what it queued, and later calls on it are refused.
    t0 = time.time()
    g.abort()
    torch.cuda.synchronize()
    print(f"  abort() and the stream's end took {time.time() - t0:.2f} s")
    try:
        dist.all_reduce(t, group=g)
        ck.bad.append("a call after abort() returned normally")
    except ValueError as e:
        if "aborted" not in str(e):
            ck.bad.append(f"the call after abort() raised, but not naming the abort: {e}")
    # The default group is untouched.
    t = torch.ones(10, device=dev)
    dist.all_reduce(t)
    ck.eq("default group after the error", t, torch.full((10,), float(ws)))


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
        ck.eq(f"mesh {name} group size", torch.tensor(dist.get_world_size(g)),
              torch.tensor(len(peers)))
    sub = dist.new_group([1, 3])
    if rank in (1, 3):
        t = torch.full((5,), float(rank), device=dev)
        dist.all_reduce(t, group=sub)
        ck.eq("new_group([1, 3]) all_reduce", t, torch.full((5,), 4.0))
    t = torch.full((5,), 1.0, device=dev)
    dist.all_reduce(t)
    ck.eq("world all_reduce after sub-groups", t, torch.full((5,), float(ws)))


CASES = {"ops": case_ops, "nccl_fallback": case_nccl_fallback, "funcol": case_funcol,
         "compile": case_compile,
         "graph": case_graph, "ddp": case_ddp, "fsdp2": case_fsdp2,
         "async_error": case_async_error, "mesh": case_mesh}


def worker():
    import torch.distributed as dist
    import p2pkit  # registers the backend
    rank, ws = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    if os.environ.get("INIT_DEVICE_ID") == "1":
        dist.init_process_group("cpu:gloo,cuda:p2pkit", device_id=dev)
    else:
        dist.init_process_group("cpu:gloo,cuda:p2pkit")
    pg = dist.group.WORLD
    print(f"rank {rank}: default group {type(pg).__name__}, library {p2pkit.library_path()}",
          flush=True)
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
        print(f"rank {rank}: destroy_process_group: the default group's communicator "
              f"{'closed' if getattr(pg, '_comm', None) is None else 'NOT closed (left to exit)'}")
    except Exception as e:  # noqa: BLE001
        print(f"rank {rank}: teardown: {e}")


if __name__ == "__main__":
    if os.environ.get("TORCH_BACKEND_TEST_WORKER") == "1":
        worker()
    else:
        unittest.main()
