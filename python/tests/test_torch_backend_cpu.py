"""The torch.distributed backend's parts that need no GPU (CI): what goes to
p2pkit and what to NCCL (p2pkit/_plan.py, no torch needed), the unique id
through Python (made, checked, refused when damaged or short), and, where
torch is installed, the registration of "p2pkit" on import. The GPU side is
python/tests/test_torch_backend.py (scripts/device/torch.sh)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import p2pkit  # noqa: E402
from p2pkit import _plan  # noqa: E402

try:
    import torch
    import torch.distributed as dist
except ImportError:
    torch = dist = None


class Reductions(unittest.TestCase):
    def test_native_types_and_ops(self):
        for dt in ("float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8"):
            for op, want in (("sum", "sum"), ("product", "prod"), ("min", "min"), ("max", "max"),
                             ("avg", "avg")):
                p = _plan.reduction(dt, op)
                self.assertEqual(p.kind, "p2pkit", (dt, op))
                self.assertEqual(p.op, _plan.REDOPS[want])
                self.assertIsNone(p.view)
                self.assertFalse(p.prescale)

    def test_premul_sum_is_a_prescale_then_a_sum(self):
        for dt in ("float32", "bfloat16", "float16", "float64"):
            p = _plan.reduction(dt, "PREMUL_SUM")
            self.assertEqual((p.kind, p.op, p.prescale), ("p2pkit", _plan.REDOPS["sum"], True))
        p = _plan.reduction("int32", "premul_sum")
        self.assertEqual(p.kind, "nccl")
        self.assertIn("PREMUL_SUM of int32", p.reason)

    def test_bool_and_complex(self):
        p = _plan.reduction("bool", "sum")
        self.assertEqual((p.kind, p.view, p.op), ("p2pkit", "uint8", _plan.REDOPS["max"]))
        p = _plan.reduction("bool", "product")
        self.assertEqual(p.op, _plan.REDOPS["min"])
        p = _plan.reduction("complex64", "avg")
        self.assertEqual((p.kind, p.view, p.op), ("p2pkit", "real", _plan.REDOPS["avg"]))
        self.assertEqual(_plan.reduction("complex128", "premul_sum").prescale, True)
        self.assertEqual(_plan.reduction("complex64", "max").kind, "nccl")

    def test_what_goes_to_nccl_says_why(self):
        for dt, op, why in (("int8", "sum", "does not reduce int8"),
                            ("float8_e4m3fn", "max", "does not reduce float8_e4m3fn"),
                            ("uint64", "sum", "does not reduce uint64"),
                            ("int32", "band", "no BAND reduction"),
                            ("float32", "bxor", "no BXOR reduction")):
            p = _plan.reduction(dt, op)
            self.assertEqual(p.kind, "nccl", (dt, op))
            self.assertIn(why, p.reason)


class Movement(unittest.TestCase):
    def test_any_type_moves_as_bytes(self):
        self.assertIsNone(_plan.movement("float32").view)
        for dt in ("int8", "bool", "complex64", "float8_e5m2", "int16"):
            p = _plan.movement(dt)
            self.assertEqual((p.kind, p.view), ("p2pkit", "uint8"))

    def test_all_to_all_even_and_uneven(self):
        self.assertEqual(_plan.all_to_all(4, 16, 16, [], []).kind, "p2pkit")
        self.assertEqual(_plan.all_to_all(4, 16, 16, [4, 4, 4, 4], [4, 4, 4, 4]).kind, "p2pkit")
        p = _plan.all_to_all(4, 16, 16, [1, 5, 5, 5], [4, 4, 4, 4])
        self.assertEqual(p.kind, "nccl")
        self.assertIn("uneven", p.reason)
        with self.assertRaisesRegex(ValueError, "3 input splits for 4 ranks"):
            _plan.all_to_all(4, 16, 16, [5, 5, 6], [])
        with self.assertRaisesRegex(ValueError, "do not split evenly over 4 ranks"):
            _plan.all_to_all(4, 15, 15, [], [])

    def test_lists_of_unequal_sizes_go_to_nccl(self):
        self.assertEqual(_plan.same_sizes("all_gather", [3, 3, 3]).kind, "p2pkit")
        p = _plan.same_sizes("all_gather", [3, 4, 3])
        self.assertEqual(p.kind, "nccl")
        self.assertIn("all_gather with tensors of different sizes", p.reason)


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


@unittest.skipIf(dist is None, "torch is not installed here: the backend's registration is "
                               "checked on the device (scripts/device/torch.sh)")
class Registration(unittest.TestCase):
    def test_registered_on_import(self):
        self.assertIn("P2PKIT", dist.Backend._plugins)
        self.assertEqual(dist.Backend("p2pkit"), "p2pkit")

    def test_op_names(self):
        from p2pkit.torch_backend import _op_of
        self.assertEqual(_op_of(dist.ReduceOp.SUM), ("sum", None))
        self.assertEqual(_op_of(dist.ReduceOp.AVG)[0], "avg")
        name, factor = _op_of(dist._make_nccl_premul_sum(0.25))
        self.assertEqual((name, factor), ("premul_sum", 0.25))


@unittest.skipIf(dist is None, "torch is not installed here: checked on the device "
                               "(scripts/device/torch.sh)")
class Ending(unittest.TestCase):
    """After abort() or shutdown() a group refuses every call, in place of
    making a new communicator (abort leaves the peers' state unknown)."""

    class FakeComm:
        def __init__(self):
            self.calls = []

        def abort(self):
            self.calls.append("abort")

        def close(self):
            self.calls.append("close")

    def _group(self):
        from p2pkit.torch_backend import ProcessGroupP2PKit
        pg = ProcessGroupP2PKit(None, 0, 2, None)
        pg._comm = self.FakeComm()
        return pg, pg._comm

    def test_abort_gives_the_communicator_up_and_refuses_later_calls(self):
        pg, comm = self._group()
        pg.abort()
        self.assertEqual(comm.calls, ["abort"])
        self.assertIsNone(pg._comm)
        for call in (lambda: pg._ensure(torch.device("cuda", 0), "all_reduce"),
                     lambda: pg._nccl_pg("all_reduce", "int8")):
            with self.assertRaisesRegex(ValueError, "all_reduce: this group was aborted"):
                call()
        pg.abort()  # nothing more to give up
        self.assertEqual(comm.calls, ["abort"])

    def test_shutdown_closes_and_refuses_later_calls(self):
        pg, comm = self._group()
        pg.shutdown()
        self.assertEqual(comm.calls, ["close"])
        with self.assertRaisesRegex(ValueError, "broadcast: this group was shut down"):
            pg._ensure(torch.device("cuda", 0), "broadcast")


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


@unittest.skipUnless(os.path.exists(os.path.join(ROOT, "pyproject.toml")), "not in the source tree")
class Packaging(unittest.TestCase):
    def test_wheel_version_is_the_libraries(self):
        import re
        with open(os.path.join(ROOT, "pyproject.toml")) as f:
            py = re.search(r'^version = "([0-9.]+)"', f.read(), re.M).group(1)
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            cm = re.search(r"project\(p2pkit VERSION ([0-9.]+)", f.read()).group(1)
        self.assertEqual(py, cm)
        major, minor, patch = (int(x) for x in cm.split("."))
        self.assertEqual(p2pkit.version(), major * 10000 + minor * 100 + patch)


if __name__ == "__main__":
    unittest.main()
