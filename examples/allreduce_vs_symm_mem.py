# SPDX-License-Identifier: BSD-3-Clause
"""p2pkit's all-reduce against PyTorch's own NVLink all-reduces on symmetric
memory (torch.ops.symm_mem.one_shot_all_reduce and two_shot_all_reduce_)
and against NCCL, one process per GPU, eager and under a CUDA graph, in one
run. Every result is checked; times are CUDA events after warm-up, the
median of --repeats timed loops of --iters calls.

    torchrun --nproc_per_node=2 examples/allreduce_vs_symm_mem.py [--json FILE]

Needs a GPU per rank (symmetric memory cannot share one) and the p2pkit
package (pip install .). NVLink multicast stays off: this script sets
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NCCL_NVLS_ENABLE=0 and never calls
the multimem operations. Exit 0 when every result was right, 1 otherwise,
2 when the machine cannot run it."""
import argparse
import json
import os
import statistics
import sys

os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def sizes(lo, hi):
    s = lo
    while s <= hi:
        yield s
        s *= 2


def timed(fn, iters, repeats, graph):
    """Median microseconds per call over `repeats` loops of `iters` calls."""
    stream = torch.cuda.current_stream()
    if graph:
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(stream)
        with torch.cuda.stream(side):
            fn()  # warm-up outside the capture
            with torch.cuda.graph(g, stream=side):
                for _ in range(iters):
                    fn()
        stream.wait_stream(side)
        run = g.replay
    else:
        def run():
            for _ in range(iters):
                fn()
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        dist.barrier()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / iters)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-b", "--minbytes", default="8")
    ap.add_argument("-e", "--maxbytes", default="256M",
                    help="largest message; symmetric buffers of this size are allocated")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--json", help="write every row here (rank 0)")
    args = ap.parse_args()

    if "RANK" not in os.environ:
        sys.exit("allreduce_vs_symm_mem: run it under torchrun (one process per GPU)")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if torch.cuda.device_count() < int(os.environ.get("LOCAL_WORLD_SIZE", world)):
        print("allreduce_vs_symm_mem: symmetric memory needs a GPU per rank "
              f"({torch.cuda.device_count()} GPU(s) for {world} ranks)", file=sys.stderr)
        sys.exit(2)
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    import torch.distributed._symmetric_memory as symm_mem
    import p2pkit

    uid = [p2pkit.get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(uid, src=0)
    comm = p2pkit.Comm(unique_id=uid[0], rank=rank, world_size=world, device=local)
    group = dist.group.WORLD.group_name
    dtype = getattr(torch, args.dtype)
    esize = torch.tensor([], dtype=dtype).element_size()
    maxn = parse_size(args.maxbytes) // esize
    symm = symm_mem.empty(maxn, dtype=dtype, device=dev)
    symm_mem.rendezvous(symm, group)
    plain = torch.empty(maxn, dtype=dtype, device=dev)
    # Small integers: every sum is exact in bf16 whatever the order.
    fill = float(rank % 4 + 1)
    want = float(sum(r % 4 + 1 for r in range(world)))

    def runners(n):
        s, p = symm[:n], plain[:n]
        return {
            "nccl": (lambda: dist.all_reduce(p), p),
            "p2pkit": (lambda: p2pkit.all_reduce(p, op="sum", comm=comm), p),
            "symm_one_shot": (lambda: torch.ops.symm_mem.one_shot_all_reduce(s, "sum", group), None),
            "symm_two_shot": (lambda: torch.ops.symm_mem.two_shot_all_reduce_(s, "sum", group), s),
        }

    rows, wrong = [], 0
    for nbytes in sizes(max(parse_size(args.minbytes), esize), maxn * esize):
        n = nbytes // esize
        for graph in (False, True):
            row = {"bytes": n * esize, "graph": graph}
            for name, (fn, out) in runners(n).items():
                # Check once: from fill, one call must give the sum.
                (symm if out is None or out.data_ptr() == symm.data_ptr() else plain)[:n].fill_(fill)
                got = fn() if out is None else (fn(), out)[1]
                torch.cuda.synchronize()
                ok = bool(torch.all(got == want).item())
                wrong += 0 if ok else 1
                us = timed(fn, args.iters, args.repeats, graph)
                row[name] = {"us": round(us, 3), "ok": ok}
            row["p2pkit_vs"] = {k: round(row[k]["us"] / row["p2pkit"]["us"], 3)
                                for k in ("nccl", "symm_one_shot", "symm_two_shot")}
            rows.append(row)
            if rank == 0:
                print(f"{row['bytes']:>12} {'graph' if graph else 'eager':5} "
                      + " ".join(f"{k} {row[k]['us']:9.2f}{'' if row[k]['ok'] else '!'}"
                                 for k in ("p2pkit", "nccl", "symm_one_shot", "symm_two_shot"))
                      + "  p2pkit speedup: " + " ".join(f"{k} {v:.2f}x" for k, v in row["p2pkit_vs"].items()),
                      flush=True)
    if rank == 0:
        print(f"# {world} ranks, {args.dtype}; speedup = other's time / p2pkit's; '!' = wrong result; "
              f"wrong results: {wrong}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"tool": "allreduce_vs_symm_mem", "ranks": world, "dtype": args.dtype,
                           "torch": torch.__version__, "rows": rows, "wrong": wrong}, f, indent=1)
    comm.close()
    dist.destroy_process_group()
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
