# SPDX-License-Identifier: BSD-3-Clause
"""DDP with p2pkit's comm hook gives the same parameters as DDP without it
(within float tolerance) after N steps: the hook on a Comm of its own, not
the torch.distributed backend. Needs torch and a GPU (with one, the two
ranks share it: torchrun_case.py). scripts/device/torch.sh runs it.

As a test (unittest/pytest): launches itself under torchrun with 2 processes;
skips without torch or a GPU. Under torchrun (the __main__
part): every rank trains two identical models from the same seed, one DDP
with the default NCCL all-reduce, one with p2pkit.ddp_comm_hook, on the same
data, and compares their parameters after every step; rank 0 prints PASS."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchrun_case import main, rank_device, run_two_ranks, torch, two_ranks  # noqa: E402

STEPS = 20
RTOL, ATOL = 1e-5, 1e-6


def make_model():
    import torch.nn as nn
    torch.manual_seed(0)
    # > 25 MiB of parameters so DDP makes several buckets
    return nn.Sequential(nn.Linear(512, 4096), nn.ReLU(), nn.Linear(4096, 2048), nn.ReLU(),
                         nn.Linear(2048, 10)).cuda()


def worker():
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    import p2pkit

    dev = rank_device()
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    ref = DDP(make_model(), device_ids=[dev])
    hooked = DDP(make_model(), device_ids=[dev])
    comm = p2pkit.Comm(device=dev)
    hooked.register_comm_hook(comm, p2pkit.ddp_comm_hook)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (ref, hooked)]
    gen = torch.Generator(device="cuda").manual_seed(1234 + rank)
    worst = 0.0
    for step in range(STEPS):
        x = torch.randn(32, 512, device="cuda", generator=gen)
        y = torch.randint(0, 10, (32,), device="cuda", generator=gen)
        for m, opt in zip((ref, hooked), opts):
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
        for a, b in zip(ref.parameters(), hooked.parameters()):
            if not torch.allclose(a, b, rtol=RTOL, atol=ATOL):
                print(f"rank {rank} step {step}: parameters differ by "
                      f"{(a - b).abs().max().item():.3g}", flush=True)
                sys.exit(1)
            worst = max(worst, (a - b).abs().max().item())
    # the replicas agree with each other too
    flat = torch.cat([p.detach().flatten() for p in hooked.parameters()])
    other = flat.clone()
    dist.broadcast(other, 0)
    if not torch.equal(flat, other):
        print(f"rank {rank}: replicas differ from rank 0", flush=True)
        sys.exit(1)
    if comm.async_error() is not None:
        print(f"rank {rank}: {comm.async_error()}", flush=True)
        sys.exit(1)
    comm.close()
    dist.destroy_process_group()
    if rank == 0:
        print(f"PASS: {STEPS} steps, largest difference {worst:.3g}")


@two_ranks
class DDPHook(unittest.TestCase):
    def test_hook_matches_nccl(self):
        run_two_ranks(self, __file__)


if __name__ == "__main__":
    main(worker)
