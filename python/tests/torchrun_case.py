# SPDX-License-Identifier: BSD-3-Clause
"""What the torchrun-launched Python tests share: the package on the path,
torch if there is one (`torch`, `NGPU`), a skip without torch or a GPU
(`two_ranks`), a test case that runs a file under torchrun with 2 processes
and wants PASS from rank 0, each rank's GPU, and the __main__ switch between
the worker (under torchrun) and unittest.

With fewer than 2 GPUs the two ranks share GPU 0 (P2PKIT_SHARE_GPUS=1:
results only, never timings), and NCCL, which refuses two ranks on one GPU
of one host, sees each rank as a host of its own (NCCL_HOSTID per rank,
loopback sockets), as scripts/device/torch.sh runs the backend's tests."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import torch
    NGPU = torch.cuda.device_count()
except ImportError:
    torch = None
    NGPU = 0

two_ranks = unittest.skipUnless(torch is not None and NGPU >= 1, "needs torch with a CUDA GPU")


def run_two_ranks(case, path, timeout=300):
    """Run `path` under torchrun with 2 processes; `case` (a TestCase)
    asserts it exits 0 and prints PASS."""
    env = dict(os.environ)
    if NGPU < 2:
        env.update(P2PKIT_SHARE_GPUS="1", NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc_per_node=2", os.path.abspath(path)],
                       capture_output=True, text=True, timeout=timeout, env=env)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr[-4000:])
    case.assertEqual(r.returncode, 0)
    case.assertIn("PASS", r.stdout)


def rank_device():
    """Under torchrun: this rank's GPU (LOCAL_RANK, or GPU 0 when the ranks
    share it), made current; NCCL_HOSTID set per rank when they share."""
    local = int(os.environ["LOCAL_RANK"])
    if torch.cuda.device_count() < 2:
        os.environ["NCCL_HOSTID"] = f"p2pkit-host{local}"
    dev = local % torch.cuda.device_count()
    torch.cuda.set_device(dev)
    return dev


def main(worker):
    """Under torchrun (LOCAL_RANK set): the worker; else the tests."""
    if "LOCAL_RANK" in os.environ:
        worker()
    else:
        unittest.main(module="__main__")
