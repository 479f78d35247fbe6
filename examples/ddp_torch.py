"""The standard DistributedDataParallel training script (torchrun, NCCL
backend), plus one line: p2pkit averages the gradients instead of NCCL.

    torchrun --nproc_per_node=$(nvidia-smi -L | wc -l) examples/ddp_torch.py
    PYTHONPATH=python P2PKIT_LIB=build/libp2pkit.so torchrun ... (from the source tree)

--no-p2pkit trains without the hook (plain DDP), for comparison."""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import p2pkit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--no-p2pkit", action="store_true")
    args = ap.parse_args()

    dist.init_process_group("nccl")
    rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, args.width), nn.ReLU(), nn.Linear(args.width, args.width),
                          nn.ReLU(), nn.Linear(args.width, 10)).cuda()
    ddp = DDP(model, device_ids=[local_rank])
    if not args.no_p2pkit:
        ddp.register_comm_hook(p2pkit.Comm(), p2pkit.ddp_comm_hook)  # the one added line
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator(device="cuda").manual_seed(1000 + rank)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for step in range(args.steps):
        x = torch.randn(args.batch, 1024, device="cuda", generator=gen)
        y = torch.randint(0, 10, (args.batch,), device="cuda", generator=gen)
        loss = nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if rank == 0 and (step % 20 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {loss.item():.5f}")
    torch.cuda.synchronize()
    if rank == 0:
        dt = (time.perf_counter() - t0) / args.steps
        print(f"{'NCCL' if args.no_p2pkit else 'p2pkit'} hook: {dt * 1e3:.2f} ms/step")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
