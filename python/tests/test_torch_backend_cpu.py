# SPDX-License-Identifier: BSD-3-Clause
"""The torch.distributed backend's parts that need no GPU (CI; with torch,
scripts/device/torch.sh runs them against the wheel): the unique id through
Python (made, checked, refused when damaged or short); where torch is
installed, "p2pkit" registered on import with torch's extended API and,
without the C++ backend, the one line init_process_group raises; where the
backend is built, what a group is before its first CUDA call: its Options
(pg_options), the group's timeout=, its name and abilities, sequence
numbers, CPU tensors refused by it and carried by the gloo half of
"cpu:gloo,cuda:p2pkit" (monitored_barrier too), new_group, coalescing's
bookkeeping, abort; and that the backend exports no libstdc++ of its own.
The GPU side is python/tests/test_torch_backend.py."""
import copy
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import p2pkit  # noqa: E402

try:
    import torch
    import torch.distributed as dist
    from p2pkit import torch_backend as tb
except ImportError:
    torch = dist = tb = None

NO_TORCH = "torch is not installed here: the backend's registration is checked where it is " \
           "(scripts/device/torch.sh)"


class UniqueId(unittest.TestCase):
    def setUp(self):
        self.saved = os.environ.get("MASTER_ADDR")
        os.environ["MASTER_ADDR"] = "127.0.0.1"

    def tearDown(self):
        if self.saved is None:
            os.environ.pop("MASTER_ADDR", None)
        else:
            os.environ["MASTER_ADDR"] = self.saved

    def test_made_fresh_each_time(self):
        a, b = p2pkit.get_unique_id(), p2pkit.get_unique_id()
        self.assertEqual(len(a), p2pkit.UNIQUE_ID_BYTES)
        self.assertNotEqual(a, b)
        self.assertEqual(a[:4], b"P2KU")

    def test_short_or_damaged_ids_are_refused(self):
        uid = p2pkit.get_unique_id()
        with self.assertRaisesRegex(ValueError, "unique_id has 64 bytes, expected 128"):
            p2pkit.Comm(unique_id=uid[:64], rank=0, world_size=2)
        with self.assertRaisesRegex(TypeError, "unique_id must be bytes"):
            p2pkit.Comm(unique_id="abc", rank=0, world_size=2)
        with self.assertRaisesRegex(ValueError, "needs rank= and world_size="):
            p2pkit.Comm(unique_id=uid, rank=0)
        with self.assertRaisesRegex(ValueError, "takes no addr, port or secret"):
            p2pkit.Comm(unique_id=uid, rank=0, world_size=2, port=1234)
        bad = bytearray(uid)
        bad[30] ^= 0xFF
        with self.assertRaises(p2pkit.P2PKitError) as cm:
            p2pkit.Comm(unique_id=bytes(bad), rank=0, world_size=2)
        self.assertEqual(cm.exception.call, "p2pkit_comm_init_rank_config")
        self.assertIn("damaged", cm.exception.detail)
        with self.assertRaises(p2pkit.P2PKitError) as cm:
            p2pkit.Comm(unique_id=uid, rank=2, world_size=2)
        self.assertIn("rank 2 of 2", cm.exception.detail)


@unittest.skipIf(dist is None, NO_TORCH)
class Registration(unittest.TestCase):
    def test_registered_on_import(self):
        plugin = dist.Backend._plugins["P2PKIT"]
        self.assertTrue(plugin.extended_api)
        self.assertIs(plugin.creator_fn, tb._create)
        self.assertEqual(dist.Backend("p2pkit"), "p2pkit")
        self.assertEqual(dist.Backend.backend_capability["p2pkit"], ["cuda"])

    def test_without_the_extension_one_line_says_how_to_get_it(self):
        with tempfile.TemporaryDirectory() as d:
            why = tb._unavailable(ImportError("No module named 'p2pkit._c10d'"), d)
            self.assertIn("was built without its PyTorch backend", why)
            open(os.path.join(d, "_c10d.cpython-311-x86_64-linux-gnu.so"), "w").close()
            other = tb._unavailable(ImportError("undefined symbol: _ZN3c10"), d)
            self.assertIn(f"does not load with torch {torch.__version__} (undefined symbol", other)
        for line in (why, other):
            self.assertNotIn("\n", line)
            self.assertIn("pip install --no-build-isolation .", line)
        saved = tb._c10d, tb._WHY
        tb._c10d, tb._WHY = None, why
        try:
            with self.assertRaises(RuntimeError) as cm:
                dist.init_process_group("cpu:gloo,cuda:p2pkit", store=dist.HashStore(), rank=0,
                                        world_size=1)
            self.assertEqual(str(cm.exception), why)
        finally:
            tb._c10d, tb._WHY = saved
            if dist.is_initialized():
                dist.destroy_process_group()


class stderr_of:
    """What C++ writes to stderr (TORCH_WARN) inside the block: .text."""

    def __enter__(self):
        sys.stderr.flush()
        self.f = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.f.fileno(), 2)
        return self

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.f.seek(0)
        self.text = self.f.read().decode(errors="replace")
        self.f.close()
        return False


def _group(**kw):
    dist.init_process_group("cpu:gloo,cuda:p2pkit", store=dist.HashStore(), rank=0, world_size=1,
                            **kw)
    return dist.group.WORLD, dist.group.WORLD._get_backend(torch.device("cuda"))


@unittest.skipIf(dist is None, NO_TORCH)
@unittest.skipUnless(tb is not None and tb.available(), "the C++ backend is not built into this "
                     "install (checked against the wheel by scripts/device/torch.sh)")
class Linkage(unittest.TestCase):
    def test_no_libstdcxx_of_its_own_exported(self):
        """A compiler without a shared libstdc++ links libstdc++.a into the
        backend; exported, its definitions met those of the libstdc++.so.6
        torch had loaded and the backend died at its first ostringstream
        (one H100 machine, g++ 13.3). Linked with --exclude-libs,ALL they
        stay local: the backend may export weak template instances (as
        with a shared libstdc++), never a strong libstdc++ definition."""
        from p2pkit import _c10d
        if shutil.which("nm") is None:
            self.skipTest("nm (binutils) is not installed here")
        out = subprocess.run(["nm", "-D", "--defined-only", "-C", _c10d.__file__],
                             capture_output=True, text=True, check=True).stdout
        strong = []  # nm's lines: ADDRESS TYPE NAME
        for fields in (ln.split(" ", 2) for ln in out.splitlines()):
            if len(fields) == 3 and fields[1] in ("T", "D", "B", "R") and any(
                    w in fields[2] for w in ("std::", "__cxa_", "__gxx_personality")):
                strong.append(" ".join(fields))
        self.assertEqual(strong[:5], [], f"{len(strong)} libstdc++ definitions exported by "
                         f"{_c10d.__file__} (the first five above)")


@unittest.skipIf(dist is None, NO_TORCH)
@unittest.skipUnless(tb is not None and tb.available(), "the C++ backend is not built into this "
                     "install (checked against the wheel by scripts/device/torch.sh)")
class Group(unittest.TestCase):
    """One rank, its group made; nothing here touches CUDA (no GPU in CI)."""

    def tearDown(self):
        if dist.is_initialized():
            dist.destroy_process_group()

    def test_options(self):
        o = tb.Options(max_blocks=8, is_high_priority_stream=True)
        self.assertIsInstance(o, torch._C._distributed_c10d.Backend.Options)
        self.assertEqual((o.max_blocks, o.is_high_priority_stream), (8, True))
        self.assertEqual((tb.Options().max_blocks, tb.Options().is_high_priority_stream), (-1, False))
        c = copy.deepcopy(o)
        c.max_blocks = 3
        self.assertEqual((o.max_blocks, c.max_blocks), (8, 3))
        self.assertEqual(copy.copy(o).max_blocks, 8)

    def test_pg_options_and_timeout_reach_the_backend(self):
        o = tb.Options(max_blocks=6)
        pg, b = _group(timeout=datetime.timedelta(seconds=77), pg_options=o)
        self.assertIsInstance(b, tb.ProcessGroupP2PKit)
        self.assertEqual(b.options.max_blocks, 6)
        self.assertEqual(b.options._timeout, datetime.timedelta(seconds=77))
        o.max_blocks = 2  # the group took a copy
        self.assertEqual(b.options.max_blocks, 6)
        with self.assertRaisesRegex(TypeError, "pg_options must be a p2pkit.torch_backend.Options"
                                               " \\(ProcessGroupP2PKit.Options\\), not int"):
            dist.new_group([0], pg_options=3)

    def test_unchosen_timeout_is_nccls(self):
        # torch's 30-minute default for a backend other than NCCL means no
        # timeout= was given: the group takes P2PKIT_TIMEOUT, else 600 s
        # (settings are read once a process: the set case runs in a child).
        want = int(os.environ.get("P2PKIT_TIMEOUT", "600"))
        pg, b = _group()
        self.assertEqual(b.options._timeout, datetime.timedelta(seconds=want))
        dist.destroy_process_group()
        pg, b = _group(timeout=datetime.timedelta(seconds=77))  # chosen: it wins
        self.assertEqual(b.options._timeout, datetime.timedelta(seconds=77))
        code = ("import p2pkit, torch, torch.distributed as dist\n"
                "dist.init_process_group('cpu:gloo,cuda:p2pkit', store=dist.HashStore(), rank=0, "
                "world_size=1)\n"
                "print(dist.group.WORLD._get_backend(torch.device('cuda')).options._timeout"
                ".total_seconds())\n")
        env = dict(os.environ, P2PKIT_TIMEOUT="45")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        self.assertEqual(out.stdout.split()[-1], "45.0")

    def test_identity_and_abilities(self):
        pg, b = _group()
        self.assertEqual(b.name(), "p2pkit")
        self.assertTrue(b.supports_splitting)
        self.assertTrue(b.supports_coalescing)
        self.assertEqual(b._device, -1)  # no communicator before the first CUDA call
        self.assertEqual(b._get_sequence_number_for_group(), 0)
        self.assertEqual(b.comm_split_count(), 0)
        b.perform_nocolor_split(torch.device("cuda", 0))  # new_group's non-members: nothing
        self.assertEqual(b._async_error(), "")

    def test_cpu_tensors(self):
        pg, b = _group()
        with self.assertRaisesRegex(ValueError, "p2pkit: all_reduce: the tensor is on cpu; this "
                                                "backend carries CUDA tensors"):
            b.allreduce([torch.ones(2)])
        with self.assertRaisesRegex(ValueError, "send: the tensor is on cpu"):
            b.send([torch.ones(2)], 0, 0)
        t = torch.full((3,), 2.0)
        dist.all_reduce(t)  # the gloo half
        self.assertTrue(torch.equal(t, torch.full((3,), 2.0)))
        pg.monitored_barrier(datetime.timedelta(seconds=10))  # the gloo half's

    def test_tensors_of_one_call_on_two_devices(self):
        # Refused before anything reaches p2pkit, which would take the
        # second tensor's pointer as the group's GPU's (a meta tensor stands
        # for the GPU's here: no GPU in CI).
        pg, b = _group()
        out, inp = torch.empty(4, device="meta"), torch.ones(4)
        for name, call in (("all_gather_into_tensor", lambda: b._allgather_base(out, inp)),
                           ("reduce_scatter_tensor", lambda: b._reduce_scatter_base(out, inp)),
                           ("all_to_all_single", lambda: b.alltoall_base(out, inp, [], []))):
            with self.assertRaisesRegex(ValueError, f"p2pkit: {name}: the tensors are on meta "
                                                    f"and cpu \\(one GPU per rank and group\\)"):
                call()

    def test_new_group_waits_for_its_first_cuda_call(self):
        _group()
        g = dist.new_group([0])
        self.assertEqual(g._get_backend(torch.device("cuda"))._device, -1)

    def test_coalescing_bookkeeping(self):
        pg, b = _group()
        b._start_coalescing()
        w = b._end_coalescing()
        self.assertTrue(w.is_completed())
        w.wait()
        with self.assertRaisesRegex(RuntimeError, "end_coalescing: .* no batch was started"):
            b._end_coalescing()
        b._start_coalescing()
        with stderr_of() as err:
            b._start_coalescing()  # a batch left open (its block raised): dropped, said so
        self.assertIn("an earlier batch was never ended", err.text)
        self.assertTrue(b._end_coalescing().is_completed())

    def test_abort_is_reported(self):
        pg, b = _group()
        b.abort()
        self.assertEqual(b._async_error(), "abort() was called")
        b.abort()  # once given up, nothing more to do
        b._start_coalescing()
        with self.assertRaisesRegex(dist.DistBackendError, "group '0' rank 0 of 1 was aborted: "
                                                           "abort\\(\\) was called"):
            b._end_coalescing().wait()


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


@unittest.skipUnless(os.path.exists(os.path.join(ROOT, "pyproject.toml")), "not in the source tree")
class Packaging(unittest.TestCase):
    def test_one_version_everywhere(self):
        """include/p2pkit.h writes the version once; pyproject.toml's regex,
        applied as scikit-build-core applies it, gives the wheel that
        version; the loaded library and p2pkit.__version__ report it.
        (tests/install_test.sh checks the command, p2pkit.pc and the CMake
        package.)"""
        import re
        with open(os.path.join(ROOT, "include", "p2pkit.h")) as f:
            header = f.read()
        parts = [int(re.search(rf"^#define P2PKIT_VERSION_{k} (\d+)$", header, re.M).group(1))
                 for k in ("MAJOR", "MINOR", "PATCH")]
        want = "%d.%d.%d" % tuple(parts)
        with open(os.path.join(ROOT, "pyproject.toml")) as f:
            py = f.read()
        self.assertIsNone(re.search(r"^version\s*=", py, re.M), "a second copy in pyproject.toml")
        self.assertIn('dynamic = ["version"]', py)
        table = py.split("[tool.scikit-build.metadata.version]\n", 1)[1].split("\n[", 1)[0]
        keys = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
                for m in re.finditer(r"""^(\w+) = (?:"([^"]*)"|'([^']*)')$""", table, re.M)}
        self.assertEqual(keys["provider"], "scikit_build_core.metadata.regex")
        with open(os.path.join(ROOT, keys["input"])) as f:
            match = re.search(keys["regex"], f.read(), re.MULTILINE)
        self.assertIsNotNone(match, "pyproject.toml's regex does not match " + keys["input"])
        self.assertEqual(keys["result"].format(*match.groups(), **match.groupdict()), want)
        self.assertEqual(p2pkit.version(), parts[0] * 10000 + parts[1] * 100 + parts[2])
        self.assertEqual(p2pkit.__version__, want)


if __name__ == "__main__":
    unittest.main()
