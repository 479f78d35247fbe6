#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Host time per call through torch.distributed: p2pkit's backend against
ProcessGroupNCCL in the same run, on world sizes 1 and 2 (2 ranks share
one GPU: P2PKIT_SHARE_GPUS=1 for p2pkit, and for NCCL two simulated hosts,
NCCL_HOSTID per rank).

Each rank holds both groups ("cpu:gloo,cuda:p2pkit" as the default group,
new_group(backend="nccl") beside it). For each call (8-byte tensors:
all_reduce, all_reduce(async_op=True).wait(), all_gather_into_tensor,
reduce_scatter_tensor, broadcast) and each way of timing it
  back_to_back   N calls, then one torch.cuda.synchronize(), over N
  synchronized   each call followed by torch.cuda.synchronize(), over N
the backends take turns, one repeat of N calls each, for R repeats after W
warm-up repeats; time.perf_counter() brackets each repeat, the ranks start
each one together (a gloo barrier). Rank 0's median, 10th and 90th
percentile per call are reported with p2pkit / NCCL of the medians (below
1: p2pkit's host time is shorter). Every repeat's result is checked after it
(untimed): the all-reduces start from 2^-100 on every rank, so N in-place
sums leave exactly world_size^N times it (a float32 power of two for world
sizes 1 and 2), and the other calls' outputs are what their inputs give.

    python3 scripts/device/torch_host_time.py --json out.json   (both world sizes)
    --world-sizes 1 | 2 | 1,2; --iters N (200); --repeats R (30); --warmup W (5);
    world size 2: --iters-2 (20), --repeats-2 (10), 2 warm-up repeats (ranks
    sharing one GPU take turns on it, so each call waits for a switch)

The JSON ("tool": "p2pkit torch_host_time") is what scripts/baseline.py
--merge folds into bench/baselines/<machine>.json."""
import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import time

CALLS = ("all_reduce", "all_reduce_async", "all_gather_into_tensor", "reduce_scatter_tensor",
         "broadcast")
MODES = ("back_to_back", "synchronized")
BYTES = 8
X0 = 2.0 ** -100  # the all-reduces' start (float32 keeps 2^-126..2^127 exact)
ITERS_2_MAX = 200  # world size 2 doubles the all-reduce's tensor each call: 2^-100 * 2^200 fits


def args_of(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-sizes", default="1,2")
    ap.add_argument("--iters", type=int, default=200, help="calls per repeat")
    ap.add_argument("--repeats", type=int, default=30, help="timed repeats per backend")
    ap.add_argument("--warmup", type=int, default=5, help="untimed repeats first")
    ap.add_argument("--iters-2", type=int, default=20, help="calls per repeat, world size 2")
    ap.add_argument("--repeats-2", type=int, default=10, help="timed repeats, world size 2")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per world size")
    a = ap.parse_args(argv)
    try:
        a.sizes = [int(x) for x in a.world_sizes.split(",")]
    except ValueError:
        ap.error(f"--world-sizes {a.world_sizes!r}: a comma list of 1 and 2")
    if not a.sizes or any(n not in (1, 2) for n in a.sizes):
        ap.error(f"--world-sizes {a.world_sizes!r}: a comma list of 1 and 2")
    if min(a.iters, a.repeats, a.iters_2, a.repeats_2) < 1 or a.warmup < 0:
        ap.error("--iters and --repeats must be 1 or more, --warmup 0 or more")
    if a.iters_2 > ITERS_2_MAX:
        ap.error(f"--iters-2 {a.iters_2}: at most {ITERS_2_MAX} (each all-reduce doubles its "
                 "tensor at world size 2, and its result must stay a float32 to be checked)")
    return a


# ------------------------------------------------------------------ a rank --

class Bench:
    """One backend's group and tensors, and its calls."""

    def __init__(self, group, rank, ws, dev):
        import torch
        self.g, self.rank, self.ws = group, rank, ws
        n = BYTES // 4
        self.ar = torch.full((n,), X0, device=dev)
        self.ag_in = torch.full((n,), float(rank + 1), device=dev)
        self.ag_out = torch.zeros(ws * n, device=dev)
        self.rs_in = torch.ones(ws * n, device=dev)
        self.rs_out = torch.zeros(n, device=dev)
        self.bc = torch.full((n,), float(rank + 7), device=dev)

    def call(self, name):
        import torch.distributed as dist
        if name == "all_reduce":
            return lambda: dist.all_reduce(self.ar, group=self.g)
        if name == "all_reduce_async":
            return lambda: dist.all_reduce(self.ar, group=self.g, async_op=True).wait()
        if name == "all_gather_into_tensor":
            return lambda: dist.all_gather_into_tensor(self.ag_out, self.ag_in, group=self.g)
        if name == "reduce_scatter_tensor":
            return lambda: dist.reduce_scatter_tensor(self.rs_out, self.rs_in, group=self.g)
        return lambda: dist.broadcast(self.bc, 0, group=self.g)

    def reset(self, name):
        """Before a repeat (untimed): the all-reduces start again from X0."""
        if name.startswith("all_reduce"):
            self.ar.fill_(X0)

    def check(self, name, iters):
        """The outputs a repeat of `iters` calls must have left ("" when right)."""
        import torch
        ar = torch.full_like(self.ar, X0 * float(self.ws) ** iters)
        want = {"all_reduce": (self.ar, ar), "all_reduce_async": (self.ar, ar),
                "all_gather_into_tensor": (self.ag_out, torch.cat(
                    [torch.full_like(self.ag_in, float(r + 1)) for r in range(self.ws)])),
                "reduce_scatter_tensor": (self.rs_out, torch.full_like(self.rs_out, float(self.ws))),
                "broadcast": (self.bc, torch.full_like(self.bc, 7.0))}[name]
        torch.cuda.synchronize()
        return "" if torch.equal(*want) else f"{name}: {want[0].tolist()}, want {want[1].tolist()}"

    def verify_sum(self):
        """One all-reduce of rank + 1: the sum over the ranks."""
        import torch
        import torch.distributed as dist
        t = torch.full_like(self.ar, float(self.rank + 1))
        dist.all_reduce(t, group=self.g)
        torch.cuda.synchronize()
        want = float(self.ws * (self.ws + 1) // 2)
        return "" if torch.equal(t, torch.full_like(t, want)) else f"all_reduce sum: {t.tolist()}"


def time_repeat(fn, iters, mode):
    import torch
    sync = torch.cuda.synchronize
    t0 = time.perf_counter()
    if mode == "back_to_back":
        for _ in range(iters):
            fn()
        sync()
    else:
        for _ in range(iters):
            fn()
            sync()
    return (time.perf_counter() - t0) / iters * 1e6


def summary(us):
    q = statistics.quantiles(us, n=10) if len(us) > 1 else [us[0]] * 9
    return {"median": round(statistics.median(us), 3), "p10": round(q[0], 3),
            "p90": round(q[-1], 3), "min": round(min(us), 3)}


def worker(a):
    import torch
    import torch.distributed as dist
    import p2pkit
    from p2pkit import torch_backend as tb
    rank, ws = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    if not tb.available():
        raise SystemExit(tb.why_unavailable())
    dist.init_process_group("cpu:gloo,cuda:p2pkit")
    benches = {"p2pkit": Bench(dist.group.WORLD, rank, ws, dev),
               "nccl": Bench(dist.new_group(backend="nccl"), rank, ws, dev)}
    ref = dist.new_group(backend="gloo")
    iters, repeats, warmup = (a.iters, a.repeats, a.warmup) if ws == 1 else \
        (a.iters_2, a.repeats_2, min(a.warmup, 2))
    rows, bad = [], []
    for b in benches.values():
        bad += [e for e in [b.verify_sum()] if e]
    for name in CALLS:
        for mode in MODES:
            us = {k: [] for k in benches}
            checked = []
            for rep in range(warmup + repeats):
                for k, b in benches.items():
                    b.reset(name)
                    dist.barrier(group=ref)
                    t = time_repeat(b.call(name), iters, mode)
                    if rep >= warmup:
                        us[k].append(t)
                    e = b.check(name, iters)
                    if e and len(checked) < 4:
                        checked.append(f"{k} repeat {rep}: {e}")
            bad += checked
            p, n = summary(us["p2pkit"]), summary(us["nccl"])
            rows.append({"world_size": ws, "call": name, "mode": mode, "iters": iters,
                         "repeats": repeats, "p2pkit_us": p, "nccl_us": n,
                         "p2pkit_over_nccl": round(p["median"] / n["median"], 3),
                         "checked": not checked})
    meta = {"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "gpu": torch.cuda.get_device_name(dev), "p2pkit": p2pkit.version()}
    dist.barrier(group=ref)
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"rows": rows, "bad": bad, "meta": meta}))


# -------------------------------------------------------------- the driver --

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_size(a, ws):
    """Rank 0's report for world size ws (ranks as processes of this file)."""
    port, procs = free_port(), []
    for r in range(ws):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(ws), LOCAL_RANK="0",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCH_HOST_TIME_WORKER="1",
                   TORCHELASTIC_RUN_ID=f"host-time-{port}", NCCL_HOSTID=f"host-time-{r}",
                   NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo")
        if ws > 1:
            env["P2PKIT_SHARE_GPUS"] = "1"
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outs, deadline = [], time.time() + a.timeout
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += f"\nkilled after {a.timeout} s"
        outs.append((p.returncode, out))
    for r, (rc, out) in enumerate(outs):
        if rc != 0:
            raise SystemExit(f"world size {ws}, rank {r} exited {rc}:\n{out[-3000:]}")
    last = [ln for ln in outs[0][1].splitlines() if ln.startswith("{")]
    if not last:
        raise SystemExit(f"world size {ws}: rank 0 printed no report:\n{outs[0][1][-3000:]}")
    return json.loads(last[-1])


def print_table(rows):
    print(f"{'ranks':>5} {'call':24} {'timing':14} {'p2pkit us (p10-p90)':>24} "
          f"{'NCCL us (p10-p90)':>24} {'p2pkit/NCCL':>11}")
    for r in rows:
        p, n = r["p2pkit_us"], r["nccl_us"]
        print(f"{r['world_size']:>5} {r['call']:24} {r['mode']:14} "
              f"{p['median']:8.2f} ({p['p10']:6.2f}-{p['p90']:6.2f}) "
              f"{n['median']:8.2f} ({n['p10']:6.2f}-{n['p90']:6.2f}) {r['p2pkit_over_nccl']:>10.2f}x"
              f"{'' if r['checked'] else '  WRONG RESULTS'}")


def main(argv):
    a = args_of(argv)
    if os.environ.get("TORCH_HOST_TIME_WORKER") == "1":
        worker(a)
        return 0
    rows, bad, meta = [], [], None
    for ws in a.sizes:
        got = run_size(a, ws)
        rows += got["rows"]
        bad += [f"world size {ws}: {e}" for e in got["bad"]]
        meta = got["meta"]
    print_table(rows)
    doc = {"tool": "p2pkit torch_host_time",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           **meta, "bytes": BYTES, "iters": a.iters, "repeats": a.repeats, "warmup": a.warmup,
           "iters_2": a.iters_2, "repeats_2": a.repeats_2,
           "timing": f"host time per call, time.perf_counter() around each repeat of the calls; "
                     f"rank 0's median, 10th and 90th percentile over the repeats; world size 2: "
                     f"{a.iters_2} calls a repeat, {a.repeats_2} repeats (2 ranks share one GPU)",
           "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    for e in bad:
        print(f"WRONG: {e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
