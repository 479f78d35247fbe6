"""What the torchrun-launched Python tests share: the package on the path,
torch if there is one (`torch`, `NGPU`), a skip unless 2 GPUs
(`two_gpus`), a test case that runs a file under torchrun with 2 processes
and wants PASS from rank 0, and the __main__ switch between the worker
(under torchrun) and unittest."""
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

two_gpus = unittest.skipUnless(torch is not None and NGPU >= 2, "needs torch and 2 GPUs")


def run_two_ranks(case, path, timeout=300):
    """Run `path` under torchrun with 2 processes; `case` (a TestCase)
    asserts it exits 0 and prints PASS."""
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc_per_node=2", os.path.abspath(path)],
                       capture_output=True, text=True, timeout=timeout)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr[-4000:])
    case.assertEqual(r.returncode, 0)
    case.assertIn("PASS", r.stdout)


def main(worker):
    """Under torchrun (LOCAL_RANK set): the worker; else the tests."""
    if "LOCAL_RANK" in os.environ:
        worker()
    else:
        unittest.main(module="__main__")
