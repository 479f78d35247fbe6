# SPDX-License-Identifier: BSD-3-Clause
"""Every collective of the Python binding against torch's own arithmetic,
with a process per GPU. Needs torch and a GPU (with one, the two ranks share
it: torchrun_case.py). scripts/device/torch.sh runs it.

As a test (unittest/pytest): launches itself under torchrun with 2 processes;
skips without torch or a GPU. Under torchrun (the __main__ part): each rank
builds every rank's input from the same formula, runs all_reduce (sum, the
default, min, max), broadcast and reduce from every root,
all_gather, reduce_scatter, all_to_all and a send/recv ring in a group, for
every data type at an odd count, poisons each output first, and compares
with the result torch computes from the inputs; then send/recv and
broadcast of 256 MiB (the copy-engine paths). Rank 0 prints PASS."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchrun_case import main, rank_device, run_two_ranks, torch, two_ranks  # noqa: E402

COUNT = 100003  # odd: no multiple of 16 bytes for any type
BIG = 64 << 20  # float32 elements: 256 MiB, past the copy-engine thresholds


def inp(r, n, dtype):
    """Rank r's input: small integers (0..7), so sums of a few ranks are exact
    in every type, bfloat16 and uint8 included."""
    i = torch.arange(n, device="cuda", dtype=torch.int64)
    return ((i * (r + 3) + r * 5) % 8).to(dtype)


def poison(t):
    return t.fill_(99 if not t.dtype.is_floating_point else -1.5)


def worker():
    import p2pkit

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    comm = p2pkit.Comm(device=rank_device())
    bad = []

    def expect(what, got, want):
        torch.cuda.synchronize()
        if not torch.equal(got, want):
            where = (got != want).nonzero()[0].item()
            bad.append(f"rank {rank}: {what}: element {where} is {got[where].item()}, "
                       f"expected {want[where].item()}")

    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
              torch.int64, torch.uint8]
    for dt in dtypes:
        name = str(dt).replace("torch.", "")
        ins = [inp(r, COUNT, dt) for r in range(world)]
        stack = torch.stack(ins)
        for op, ref in (("sum", stack.sum(0).to(dt)), ("min", stack.min(0).values),
                        ("max", stack.max(0).values)):
            t = ins[rank].clone()
            kw = {} if op == "sum" else {"op": op}  # a sum by default
            expect(f"all_reduce {op} {name}", p2pkit.all_reduce(t, comm=comm, **kw), ref)
        for root in range(world):
            t = ins[rank].clone()
            expect(f"broadcast root {root} {name}", p2pkit.broadcast(t, root, comm=comm), ins[root])
            t = ins[rank].clone()
            want = stack.sum(0).to(dt) if rank == root else ins[rank]
            expect(f"reduce root {root} {name}", p2pkit.reduce(t, root, comm=comm), want)
        out = poison(torch.empty(world * COUNT, device="cuda", dtype=dt))
        expect(f"all_gather {name}", p2pkit.all_gather(out, ins[rank], comm=comm), torch.cat(ins))
        big = [inp(r, world * COUNT, dt) for r in range(world)]
        out = poison(torch.empty(COUNT, device="cuda", dtype=dt))
        want = torch.stack(big).sum(0).to(dt)[rank * COUNT:(rank + 1) * COUNT]
        expect(f"reduce_scatter {name}", p2pkit.reduce_scatter(out, big[rank], comm=comm), want)
        out = poison(torch.empty(world * COUNT, device="cuda", dtype=dt))
        want = torch.cat([big[p][rank * COUNT:(rank + 1) * COUNT] for p in range(world)])
        expect(f"all_to_all {name}", p2pkit.all_to_all(out, big[rank], comm=comm), want)
        out = poison(torch.empty(COUNT, device="cuda", dtype=dt))
        with p2pkit.group():
            p2pkit.send(ins[rank], (rank + 1) % world, comm=comm)
            p2pkit.recv(out, (rank + world - 1) % world, comm=comm)
        expect(f"send/recv ring {name}", out, ins[(rank + world - 1) % world])
    # Large: the copy-engine paths (send/recv and broadcast from 256 MiB).
    ins = [inp(r, BIG, torch.float32) for r in range(world)]
    out = poison(torch.empty(BIG, device="cuda", dtype=torch.float32))
    with p2pkit.group():
        p2pkit.send(ins[rank], (rank + 1) % world, comm=comm)
        p2pkit.recv(out, (rank + world - 1) % world, comm=comm)
    expect("send/recv ring 256 MiB", out, ins[(rank + world - 1) % world])
    t = ins[rank].clone()
    expect("broadcast 256 MiB", p2pkit.broadcast(t, 0, comm=comm), ins[0])
    err = comm.async_error()
    if err is not None:
        bad.append(f"rank {rank}: {err}")
    comm.close()
    for line in bad:
        print(line, flush=True)
    if bad:
        sys.exit(1)
    if rank == 0:
        print(f"PASS: {len(dtypes)} types, {COUNT} elements, every collective; 256 MiB "
              f"send/recv and broadcast")


@two_ranks
class Collectives(unittest.TestCase):
    def test_every_collective_matches_torch(self):
        run_two_ranks(self, __file__)


if __name__ == "__main__":
    main(worker)
