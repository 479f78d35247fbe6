# SPDX-License-Identifier: BSD-3-Clause
"""Train a GPT-style model (defined here; synthetic tokens, no downloads) with
DDP and with FSDP2 (fully_shard), on torch.distributed's NCCL backend and on
p2pkit's, in one run; report step time, tokens/s and p2pkit's ratio to NCCL.

    pip install .          # the p2pkit wheel (registers the "p2pkit" backend)
    torchrun --nproc_per_node=N examples/train.py --backend p2pkit
    torchrun --nproc_per_node=N examples/train.py                 # both, compared

--config: comm     communication is a large part of the step (a wide model,
                   few tokens per rank: gradients of ~330M parameters a step)
          compute  compute dominates (a smaller model, many tokens per rank)
          small    a smoke test (seconds)
          both     comm then compute (the default)
--backend p2pkit | nccl | both; --modes ddp,fsdp2; --steps, --warmup.
With both backends the run fails (exit 1) unless p2pkit's losses are
NCCL's: the first step's the same (one model, one batch, no reduction yet
in it) and the last within 5% (the reductions' orders differ, so do the
roundings of a bf16 run).

With more ranks than GPUs the ranks share GPUs (P2PKIT_SHARE_GPUS=1 is set,
and NCCL runs as one simulated host per rank, NCCL_HOSTID): that checks that
training runs, and its timings mean nothing."""
import argparse
import math
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    # d_model, layers, heads, vocab, seq, batch per rank
    "comm": dict(d=2048, layers=4, heads=16, vocab=32000, seq=128, batch=2),
    "compute": dict(d=1024, layers=8, heads=16, vocab=8192, seq=1024, batch=16),
    "small": dict(d=256, layers=2, heads=4, vocab=2048, seq=128, batch=4),
}


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, d, layers, heads, vocab, seq, **_):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def batch(cfg, rank, step, dev):
    """Random tokens; the target is a fixed function of the token, so the
    loss falls as the model learns it."""
    g = torch.Generator(device=dev).manual_seed(1000 * step + rank)
    x = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), device=dev, generator=g)
    return x, (x * 7 + 3) % cfg["vocab"]


def build(mode, cfg, group, dev):
    torch.manual_seed(0)
    model = GPT(**cfg).to(dev)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model, device_ids=[dev.index], process_group=group)
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed.device_mesh import DeviceMesh
    mesh = DeviceMesh.from_group(group, "cuda")
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def run(mode, backend, cfg, group, args, dev, rank, world):
    model = build(mode, cfg, group, dev)
    nparams = sum(p.numel() for p in model.parameters())  # FSDP2's DTensors: the whole size
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        x, y = batch(cfg, rank, step, dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).float().view(-1, cfg["vocab"]), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    # the slowest rank's median sets the pace
    t = torch.tensor([statistics.median(times)], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    step_s = t.item()
    tokens = cfg["batch"] * cfg["seq"] * world
    del model, opt
    torch.cuda.empty_cache()
    return dict(mode=mode, backend=backend, step_ms=step_s * 1e3, tok_s=tokens / step_s,
                first=losses[0], last=losses[-1], params=nparams)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["p2pkit", "nccl", "both"], default="both")
    ap.add_argument("--config", choices=["comm", "compute", "small", "both"], default="both")
    ap.add_argument("--modes", default="ddp,fsdp2", help="comma list of ddp, fsdp2")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in ("ddp", "fsdp2") for m in modes):
        ap.error(f"--modes: {args.modes!r}: expected ddp, fsdp2 or both")

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    ngpu = torch.cuda.device_count()
    shared = world > ngpu
    if shared:  # correctness only: ranks share GPUs
        os.environ.setdefault("P2PKIT_SHARE_GPUS", "1")
        os.environ.setdefault("NCCL_HOSTID", f"train-rank{rank}")
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    dev = torch.device("cuda", local % ngpu)
    torch.cuda.set_device(dev)
    backends = ["nccl", "p2pkit"] if args.backend == "both" else [args.backend]
    if "p2pkit" in backends:
        import p2pkit  # noqa: F401  (registers the backend)
    dist.init_process_group(f"cpu:gloo,cuda:{backends[-1]}")
    groups = {backends[-1]: dist.group.WORLD}
    for b in backends[:-1]:
        groups[b] = dist.new_group(backend=b)
    configs = ["comm", "compute"] if args.config == "both" else [args.config]
    mismatches = 0
    if rank == 0:
        print(f"{world} ranks on {ngpu} GPU(s) ({torch.cuda.get_device_name(dev)}), torch "
              f"{torch.__version__}; bf16 autocast, AdamW")
        if shared:
            print("ranks share GPUs: this checks that training runs; the timings mean nothing")
    for name in configs:
        cfg = CONFIGS[name]
        rows = [run(m, b, cfg, groups[b], args, dev, rank, world) for m in modes for b in backends]
        if rank != 0:
            continue
        print(f"\nconfig {name}: GPT d={cfg['d']} layers={cfg['layers']} heads={cfg['heads']} "
              f"vocab={cfg['vocab']}, {rows[0]['params'] / 1e6:.0f}M parameters, "
              f"{cfg['batch']}x{cfg['seq']} tokens per rank per step; median of {args.steps} "
              f"steps after {args.warmup}")
        print(f"{'mode':6} {'backend':8} {'step ms':>9} {'tokens/s':>11} {'loss first->last':>18}"
              f" {'p2pkit/nccl':>12}")
        for r in rows:
            ratio = ""
            if r["backend"] == "p2pkit" and "nccl" in backends:
                ref = next(q for q in rows if q["mode"] == r["mode"] and q["backend"] == "nccl")
                ratio = f"{r['tok_s'] / ref['tok_s']:.3f}x"
            print(f"{r['mode']:6} {r['backend']:8} {r['step_ms']:9.2f} {r['tok_s']:11.0f} "
                  f"{r['first']:8.3f}->{r['last']:<8.3f} {ratio:>12}")
        for m in modes:  # the same model, data and steps: the same losses
            mismatches += losses_differ(m, [r for r in rows if r["mode"] == m])
    dist.barrier()
    dist.destroy_process_group()
    if mismatches:
        raise SystemExit(1)


def losses_differ(mode, rows):
    """Say whether the backends' losses of `mode` differ (1) or not (0)."""
    first, last = [r["first"] for r in rows], [r["last"] for r in rows]
    if not all(math.isfinite(x) for x in first + last):
        print(f"{mode}: a loss is not finite")
        return 1
    if len(rows) < 2:
        return 0
    if abs(first[0] - first[1]) > 1e-3 * max(1.0, abs(first[0])) or \
            abs(last[0] - last[1]) > 0.05 * max(1.0, abs(last[0])):
        print(f"{mode}: p2pkit's losses differ from NCCL's: first {first[1]:.4f} vs "
              f"{first[0]:.4f}, last {last[1]:.4f} vs {last[0]:.4f}")
        return 1
    print(f"{mode}: p2pkit's losses are NCCL's (first {first[1]:.4f}, last {last[1]:.4f} vs "
          f"{last[0]:.4f})")
    return 0


if __name__ == "__main__":
    main()
