# SPDX-License-Identifier: BSD-3-Clause
"""The Python binding's CPU-side parts (CI, no GPU): loading libp2pkit,
statuses turned into exceptions with the library's sentence, tensor checks on
fake tensor-like objects, every integer and text argument checked before
ctypes, the reductions' default (a sum). Written with unittest so it runs with or without
pytest (python3 -m pytest python/tests/test_binding.py, or python3 FILE).
A GPU case at the end skips itself without torch or a GPU."""
import ctypes
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import p2pkit  # noqa: E402

try:
    import torch
    HAVE_GPU = torch.cuda.is_available()
except ImportError:
    torch = None
    HAVE_GPU = False


class FakeDevice:
    def __init__(self, kind, index):
        self.type, self.index = kind, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class FakeTensor:
    """Just what check_tensor reads."""

    def __init__(self, dtype="torch.float32", cuda=True, index=0, contiguous=True, n=4):
        self.dtype, self.is_cuda, self._contig, self._n = dtype, cuda, contiguous, n
        self.device = FakeDevice("cuda", index) if cuda else FakeDevice("cpu", None)

    def is_contiguous(self):
        return self._contig

    def numel(self):
        return self._n

    def data_ptr(self):
        return 0x1000


class Library(unittest.TestCase):
    def test_loads_and_version(self):
        lib = p2pkit.load_library()
        self.assertIs(lib, p2pkit.load_library())  # loaded once
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                               "p2pkit.h")) as f:
            header = f.read()
        major, minor, patch = (int(header.split(f"#define P2PKIT_VERSION_{k} ")[1].split()[0])
                               for k in ("MAJOR", "MINOR", "PATCH"))
        self.assertEqual(p2pkit.version(), major * 10000 + minor * 100 + patch)

    def test_comm_opts_layout_is_the_librarys(self):
        """_CommOpts is p2pkit_comm_opts_t: the library's init fills exactly
        its size and writes that size in; a size the library does not know
        is refused in one line (the ABI check Comm() relies on)."""
        lib = p2pkit.load_library()
        n = ctypes.sizeof(p2pkit._CommOpts)
        buf = ctypes.create_string_buffer(b"\xaa" * (n + 64), n + 64)
        lib.p2pkit_comm_opts_init(buf)
        self.assertEqual(buf.raw[n:], b"\xaa" * 64)  # nothing written past the binding's struct
        o = p2pkit._CommOpts.from_buffer_copy(buf.raw[:n])
        self.assertEqual((o.size, o.version), (n, 1))
        self.assertEqual((o.nranks, o.rank, o.device, o.port, o.timeout_s), (-1,) * 5)
        o.size = n - 8
        h = ctypes.c_void_p()
        self.assertEqual(lib.p2pkit_comm_init_rank(ctypes.byref(o), ctypes.byref(h)), 1)
        self.assertIn(b"p2pkit_comm_opts_t.size is", lib.p2pkit_last_error())

    def test_dtypes_agree_with_library(self):
        lib = p2pkit.load_library()
        for name, (value, size) in p2pkit.DTYPES.items():
            self.assertEqual(lib.p2pkit_dtype_size(value), size, name)
            self.assertEqual(lib.p2pkit_dtype_name(value).decode(), name)
        self.assertEqual(lib.p2pkit_dtype_size(len(p2pkit.DTYPES)), 0)

    def test_ops_agree_with_library(self):
        lib = p2pkit.load_library()
        for name, value in p2pkit.OPS.items():
            self.assertEqual(lib.p2pkit_redop_name(value).decode(), name)

    def test_missing_library_names_where_it_looked(self):
        saved, p2pkit._lib = p2pkit._lib, None
        old = os.environ.get("P2PKIT_LIB")
        os.environ["P2PKIT_LIB"] = "/nonexistent/libp2pkit.so"
        try:
            with self.assertRaises(OSError) as cm:
                p2pkit.load_library()
            self.assertIn("/nonexistent/libp2pkit.so", str(cm.exception))
            self.assertIn("P2PKIT_LIB", str(cm.exception))
        finally:
            p2pkit._lib = saved
            if old is None:
                del os.environ["P2PKIT_LIB"]
            else:
                os.environ["P2PKIT_LIB"] = old


class Errors(unittest.TestCase):
    LAUNCHER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK")

    def test_comm_without_launcher_raises_library_sentence(self):
        saved = {k: os.environ.pop(k) for k in self.LAUNCHER if k in os.environ}
        try:
            with self.assertRaises(p2pkit.P2PKitError) as cm:
                p2pkit.Comm()
            e = cm.exception
            self.assertEqual(e.status, 1)  # P2PKIT_ERR_INVALID_ARGUMENT
            self.assertEqual(e.name, p2pkit.load_library().p2pkit_strerror(1).decode())
            self.assertIn("launcher", e.detail)
            self.assertIn("p2pkit_comm_init_rank", str(e))
        finally:
            os.environ.update(saved)

    def test_grid_cap_on_no_communicator(self):
        lib = p2pkit.load_library()
        self.assertEqual(lib.p2pkit_comm_max_blocks(None), -1)
        self.assertEqual(lib.p2pkit_comm_set_max_blocks(None, 4), 1)  # INVALID_ARGUMENT
        self.assertIn("NULL", lib.p2pkit_last_error().decode())

    def test_abort_reaches_the_library_once(self):
        lib = p2pkit.load_library()
        self.assertEqual(lib.p2pkit_comm_abort(None), 1)  # INVALID_ARGUMENT
        self.assertIn("comm_abort: communicator is NULL", lib.p2pkit_last_error().decode())

        class Lib:
            handles = []

            def p2pkit_comm_abort(self, h):
                self.handles.append(h)
                return 0
        comm = object.__new__(p2pkit.Comm)
        comm._h = 1234
        real = p2pkit.load_library
        p2pkit.load_library = Lib
        try:
            comm.abort()
            comm.abort()  # once given up, nothing more to do
        finally:
            p2pkit.load_library = real
        self.assertEqual(Lib.handles, [1234])
        with self.assertRaisesRegex(ValueError, "closed"):
            comm.handle

    def test_all_reduce_needs_comm_and_known_op(self):
        with self.assertRaisesRegex(ValueError, "needs a p2pkit.Comm"):
            p2pkit.all_reduce(FakeTensor(), comm=None)

        class C:
            device = 0
        with self.assertRaisesRegex(ValueError, "operation 'mean' is not one of"):
            p2pkit.all_reduce(FakeTensor(), op="mean", comm=C())


class FakeComm:
    """What the wrappers read of a Comm; handle None reaches the library as
    a NULL communicator."""
    device, size, rank, handle = 0, 2, 0, None


class Collectives(unittest.TestCase):
    """The other collectives' wrappers: their checks, and that each reaches
    its C function with the arguments it declares (the library names the
    call and the NULL communicator)."""

    CALLS = [
        ("broadcast", lambda c: p2pkit.broadcast(FakeTensor(), 0, comm=c, stream=0)),
        ("reduce", lambda c: p2pkit.reduce(FakeTensor(), 1, comm=c, stream=0)),
        ("all_gather", lambda c: p2pkit.all_gather(FakeTensor(n=8), FakeTensor(n=4), comm=c,
                                                   stream=0)),
        ("reduce_scatter", lambda c: p2pkit.reduce_scatter(FakeTensor(n=4), FakeTensor(n=8),
                                                           comm=c, stream=0)),
        ("all_to_all", lambda c: p2pkit.all_to_all(FakeTensor(n=8), FakeTensor(n=8), comm=c,
                                                   stream=0)),
        ("send", lambda c: p2pkit.send(FakeTensor(), 1, comm=c, stream=0)),
        ("recv", lambda c: p2pkit.recv(FakeTensor(), 1, comm=c, stream=0)),
        ("all_reduce", lambda c: p2pkit.all_reduce(FakeTensor(), comm=c, stream=0)),
        ("all_to_allv", lambda c: p2pkit.all_to_allv(FakeTensor(n=5), FakeTensor(n=3), [1, 2],
                                                     [3, 2], comm=c, stream=0)),
        ("gather", lambda c: p2pkit.gather(FakeTensor(n=8), FakeTensor(n=4), 0, comm=c, stream=0)),
        ("scatter", lambda c: p2pkit.scatter(FakeTensor(n=4), FakeTensor(n=8), 0, comm=c,
                                             stream=0)),
    ]

    def test_every_call_needs_a_comm(self):
        for name, call in self.CALLS:
            with self.assertRaisesRegex(ValueError, f"{name} needs a p2pkit.Comm"):
                call(None)

    def test_every_call_reaches_the_library(self):
        for name, call in self.CALLS:
            with self.assertRaises(p2pkit.P2PKitError) as cm:
                call(FakeComm())
            self.assertEqual(cm.exception.call, f"p2pkit_{name}")
            self.assertEqual(cm.exception.name, "invalid argument")
            self.assertIn(f"{name}: communicator is NULL", cm.exception.detail)

    def test_sizes_are_checked(self):
        c = FakeComm()
        with self.assertRaisesRegex(ValueError, "all_gather: the output has 6 elements, expected "
                                                "2 x 4"):
            p2pkit.all_gather(FakeTensor(n=6), FakeTensor(n=4), comm=c, stream=0)
        with self.assertRaisesRegex(ValueError, "reduce_scatter: the input has 7 elements, "
                                                "expected 2 x 4"):
            p2pkit.reduce_scatter(FakeTensor(n=4), FakeTensor(n=7), comm=c, stream=0)
        with self.assertRaisesRegex(ValueError, "all_to_all: .* a multiple of 2 \\(got 7 and 7\\)"):
            p2pkit.all_to_all(FakeTensor(n=7), FakeTensor(n=7), comm=c, stream=0)
        with self.assertRaisesRegex(ValueError, "got 8 and 6"):
            p2pkit.all_to_all(FakeTensor(n=6), FakeTensor(n=8), comm=c, stream=0)

    def test_uneven_splits_are_checked(self):
        c = FakeComm()
        with self.assertRaisesRegex(ValueError, "all_to_allv: send counts and displacements need "
                                                "2 entries \\(one per rank\\), got 3 and 2"):
            p2pkit.all_to_allv(FakeTensor(n=8), FakeTensor(n=8), [1, 1, 1], [1, 1], comm=c)
        with self.assertRaisesRegex(ValueError, "all_to_allv: recv_counts\\[1\\]=-1 is out of range"):
            p2pkit.all_to_allv(FakeTensor(n=8), FakeTensor(n=8), [1, 1], [1, -1], comm=c)
        with self.assertRaisesRegex(TypeError, "send_counts\\[1\\] must be an int, got float"):
            p2pkit.all_to_allv(FakeTensor(n=8), FakeTensor(n=8), [1, 1.5], [1, 1], comm=c)
        with self.assertRaisesRegex(ValueError, "the send block of rank 1 \\(elements 3 to 9\\) "
                                                "lies beyond the tensor's 8 elements"):
            p2pkit.all_to_allv(FakeTensor(n=8), FakeTensor(n=8), [3, 6], [1, 1], comm=c)
        with self.assertRaisesRegex(ValueError, "the receive block of rank 0 \\(elements 7 to 9\\)"):
            p2pkit.all_to_allv(FakeTensor(n=8), FakeTensor(n=8), [1, 1], [2, 1], [0, 1], [7, 0],
                               comm=c)
        # an empty block's displacement is not read
        with self.assertRaises(p2pkit.P2PKitError):
            p2pkit.all_to_allv(FakeTensor(n=8), FakeTensor(n=8), [0, 8], [8, 0], [99, 0], [0, 99],
                               comm=c, stream=0)

    def test_rooted_shapes_are_checked(self):
        c = FakeComm()
        with self.assertRaisesRegex(ValueError, "gather: root=2 is out of range: expected 0 to 1"):
            p2pkit.gather(FakeTensor(n=8), FakeTensor(n=4), 2, comm=c)
        with self.assertRaisesRegex(ValueError, "scatter: the root needs its tensor of 2 shares"):
            p2pkit.scatter(FakeTensor(n=4), None, 0, comm=c)
        with self.assertRaisesRegex(ValueError, "gather: the root's tensor has 7 elements, "
                                                "expected 2 x 4"):
            p2pkit.gather(FakeTensor(n=7), FakeTensor(n=4), 0, comm=c)
        c.rank = 1  # off the root the whole tensor is not needed
        with self.assertRaises(p2pkit.P2PKitError) as cm:
            p2pkit.gather(None, FakeTensor(n=4), 0, comm=c, stream=0)
        self.assertIn("gather: communicator is NULL", cm.exception.detail)

    def test_types_must_agree(self):
        with self.assertRaisesRegex(ValueError, "all_gather: the tensors' data types differ "
                                                "\\(torch.float32 and torch.float16\\)"):
            p2pkit.all_gather(FakeTensor(n=8), FakeTensor(dtype="torch.float16", n=4),
                              comm=FakeComm(), stream=0)

    def test_ops_are_checked(self):
        with self.assertRaisesRegex(ValueError, "reduce: operation 'mean' is not one of"):
            p2pkit.reduce(FakeTensor(), 0, op="mean", comm=FakeComm(), stream=0)
        with self.assertRaisesRegex(ValueError, "reduce_scatter: operation 'xor' is not one of"):
            p2pkit.reduce_scatter(FakeTensor(n=2), FakeTensor(n=4), op="xor", comm=FakeComm(),
                                  stream=0)

    def test_empty_tensors_are_no_ops(self):
        # No library call at all: the NULL communicator would fail one.
        t = FakeTensor(n=0)
        self.assertIs(p2pkit.broadcast(t, 0, comm=FakeComm(), stream=0), t)
        self.assertIs(p2pkit.send(t, 1, comm=FakeComm(), stream=0), t)
        out = FakeTensor(n=0)
        self.assertIs(p2pkit.all_gather(out, t, comm=FakeComm(), stream=0), out)

    def test_group_ends_even_when_its_block_raises(self):
        lib = p2pkit.load_library()
        with p2pkit.group():
            with p2pkit.group():  # groups nest
                pass
        with self.assertRaisesRegex(KeyError, "inside"):
            with p2pkit.group():
                raise KeyError("inside")
        # Every group was ended: one more end has no start to match.
        self.assertEqual(lib.p2pkit_group_end(), 1)
        self.assertIn("without p2pkit_group_start", lib.p2pkit_last_error().decode())


class FakeLib:
    """A stand-in for libp2pkit: records each collective's arguments and
    succeeds, so a test sees what would have reached ctypes."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if not name.startswith("p2pkit_"):
            raise AttributeError(name)
        return lambda *args: self.calls.append((name, args)) or 0


class ReductionDefaults(unittest.TestCase):
    """Every reduction sums unless told otherwise, as NCCL and torch do."""

    def test_every_reduction_sums_by_default(self):
        lib, real = FakeLib(), p2pkit.load_library
        p2pkit.load_library = lambda: lib
        try:
            p2pkit.all_reduce(FakeTensor(), comm=FakeComm(), stream=0)
            p2pkit.reduce(FakeTensor(), 0, comm=FakeComm(), stream=0)
            p2pkit.reduce_scatter(FakeTensor(n=2), FakeTensor(n=4), comm=FakeComm(), stream=0)
        finally:
            p2pkit.load_library = real
        ops = {name: args[4] for name, args in lib.calls}  # the op follows count and dtype
        self.assertEqual(ops, {"p2pkit_all_reduce": p2pkit.OPS["sum"],
                               "p2pkit_reduce": p2pkit.OPS["sum"],
                               "p2pkit_reduce_scatter": p2pkit.OPS["sum"]})


class IntegerArguments(unittest.TestCase):
    """Every integer argument is checked before ctypes, which keeps only the
    low bits of a Python int (2**32 + 5 reaches a C int as 5): a ValueError
    naming the argument, its value and the range; a TypeError for bool or
    float. Each case would reach the library with a masked value without
    the check."""

    def setUp(self):
        self.saved = {k: os.environ.pop(k) for k in ("MASTER_PORT", "RANK", "WORLD_SIZE")
                      if k in os.environ}

    def tearDown(self):
        os.environ.pop("MASTER_PORT", None)
        os.environ.update(self.saved)

    def out_of_range(self, call, words):
        with self.assertRaises(ValueError) as cm:
            call()
        self.assertIn(words, str(cm.exception))
        self.assertNotIn("\n", str(cm.exception))

    def test_comm_of_the_issue(self):
        # rank 1 of 2 on port 29600 once masked: it would wait for rank 0
        self.out_of_range(lambda: p2pkit.Comm(rank=2**32 + 1, world_size=2**32 + 2,
                                              port=2**32 + 29600, timeout_s=2),
                          "Comm: rank=4294967297 is out of range: expected 0 to 2147483647")

    def test_comm_each_integer(self):
        big = 2**32
        for kw, words in (
                ({"rank": -1}, "Comm: rank=-1 is out of range: expected 0 to 2147483647"),
                ({"world_size": big + 1}, "world_size=4294967297 is out of range: expected 1 to "),
                ({"world_size": 0}, "world_size=0 is out of range"),
                ({"device": big}, "device=4294967296 is out of range: expected 0 to 2147483647"),
                ({"device": -1}, "device=-1 is out of range"),
                ({"port": big + 29600}, "port=4294996896 is out of range: expected 1 to 65535"),
                ({"port": 0}, "port=0 is out of range: expected 1 to 65535"),
                ({"timeout_s": big + 5}, "timeout_s=4294967301 is out of range: expected 1 to 86400"),
                ({"timeout_s": 0}, "timeout_s=0 is out of range"),
                ({"max_blocks": big}, "max_blocks=4294967296 is out of range: expected 0 to ")):
            with self.subTest(**kw):
                self.out_of_range(lambda: p2pkit.Comm(**{"rank": 0, "world_size": 1, **kw}), words)

    def test_comm_from_an_id(self):
        uid = p2pkit.get_unique_id()
        self.out_of_range(lambda: p2pkit.Comm(unique_id=uid, rank=0, world_size=2**32 + 1),
                          "world_size=4294967297 is out of range")
        self.out_of_range(lambda: p2pkit.Comm(unique_id=uid, rank=2**32, world_size=1),
                          "rank=4294967296 is out of range")
        self.out_of_range(lambda: p2pkit.Comm(unique_id=uid, rank=0, world_size=1, device=2**32),
                          "device=4294967296 is out of range")

    def test_bool_and_float_are_not_ints(self):
        for kw in ({"rank": True}, {"world_size": True}, {"device": False}, {"port": True},
                   {"timeout_s": True}, {"max_blocks": False}, {"rank": 0.0}, {"port": 29600.0},
                   {"rank": "0"}):
            name, value = next(iter(kw.items()))
            with self.subTest(**kw), self.assertRaises(TypeError) as cm:
                p2pkit.Comm(**{"rank": 0, "world_size": 1, **kw})
            self.assertIn(f"Comm: {name} must be an int, got {type(value).__name__}",
                          str(cm.exception))

    def test_set_max_blocks(self):
        comm = object.__new__(p2pkit.Comm)
        comm._h = ctypes.c_void_p()  # NULL: the library would refuse it, naming the handle
        self.out_of_range(lambda: comm.set_max_blocks(2**32),
                          "set_max_blocks: n=4294967296 is out of range: expected 0 to 2147483647 "
                          "(0: no cap)")
        self.out_of_range(lambda: comm.set_max_blocks(-1), "n=-1 is out of range")
        with self.assertRaisesRegex(TypeError, "set_max_blocks: n must be an int, got bool"):
            comm.set_max_blocks(True)

    def test_root_and_peer_are_ranks(self):
        c = FakeComm()  # 2 ranks
        for name, call, arg in (
                ("broadcast", lambda v: p2pkit.broadcast(FakeTensor(), v, comm=c, stream=0), "root"),
                ("reduce", lambda v: p2pkit.reduce(FakeTensor(), v, comm=c, stream=0), "root"),
                ("send", lambda v: p2pkit.send(FakeTensor(), v, comm=c, stream=0), "peer"),
                ("recv", lambda v: p2pkit.recv(FakeTensor(), v, comm=c, stream=0), "peer")):
            with self.subTest(call=name):
                for v in (2**32 + 1, 2, -1):
                    self.out_of_range(lambda: call(v), f"{name}: {arg}={v} is out of range: "
                                      f"expected 0 to 1 (a rank of the communicator's 2)")
                with self.assertRaisesRegex(TypeError, f"{name}: {arg} must be an int, got bool"):
                    call(True)

    def test_stream_is_a_pointer(self):
        c = FakeComm()
        for v, words in ((2**64 + 1, "all_reduce: stream=18446744073709551617 is out of range: "
                                     "expected 0 to 18446744073709551615"),
                         (-1, "all_reduce: stream=-1 is out of range")):
            self.out_of_range(lambda: p2pkit.all_reduce(FakeTensor(), comm=c, stream=v), words)
        with self.assertRaisesRegex(TypeError, "send: stream must be an int, got float"):
            p2pkit.send(FakeTensor(), 1, comm=c, stream=0.0)

    def test_split_sizes(self):
        c = FakeComm()
        with self.assertRaisesRegex(TypeError, "all_to_allv: send_counts\\[0\\] must be an int, got bool"):
            p2pkit.all_to_allv(FakeTensor(n=4), FakeTensor(n=4), [True, True], [2, 2], comm=c)
        self.out_of_range(lambda: p2pkit.all_to_allv(FakeTensor(n=4), FakeTensor(n=4), [2, 2],
                                                     [-2, -2], comm=c),
                          "all_to_allv: recv_counts[0]=-2 is out of range: expected 0 to ")
        with self.assertRaisesRegex(TypeError, "all_to_allv: send_displs\\[1\\] must be an int, got float"):
            p2pkit.all_to_allv(FakeTensor(n=4), FakeTensor(n=4), [2, 2], [2, 2], [0, 2.0], comm=c)


class TextArguments(unittest.TestCase):
    """addr and secret are str: bytes are refused, not guessed at;
    MASTER_PORT, when p2pkit follows it, must be a decimal port."""

    def setUp(self):
        self.saved = os.environ.pop("MASTER_PORT", None)

    def tearDown(self):
        os.environ.pop("MASTER_PORT", None)
        if self.saved is not None:
            os.environ["MASTER_PORT"] = self.saved

    def test_addr_and_secret_must_be_str(self):
        for kw in ({"addr": b"127.0.0.1"}, {"secret": b"s3cret"}, {"addr": 127}):
            name, value = next(iter(kw.items()))
            with self.subTest(**kw), self.assertRaises(TypeError) as cm:
                p2pkit.Comm(rank=0, world_size=1, **kw)
            self.assertEqual(str(cm.exception),
                             f"p2pkit: Comm: {name} must be a str, got {type(value).__name__}")

    def test_nul_is_refused_and_the_secret_not_shown(self):
        with self.assertRaises(ValueError) as cm:
            p2pkit.Comm(rank=0, world_size=1, secret="abc\0def")
        self.assertEqual(str(cm.exception), "p2pkit: Comm: secret holds a NUL character")

    def test_master_port_must_be_a_port(self):
        for v in ("\u00b2", "29500x", " 29500", "0", "65535", "-1", "9" * 5000):
            os.environ["MASTER_PORT"] = v
            with self.subTest(master_port=v[:10]), self.assertRaises(ValueError) as cm:
                p2pkit.Comm(rank=0, world_size=1)
            msg = str(cm.exception)
            self.assertTrue(msg.startswith("p2pkit: Comm: MASTER_PORT="), msg)
            self.assertIn("expected a decimal number from 1 to 65534", msg)
            self.assertLess(len(msg), 250)


class TensorChecks(unittest.TestCase):
    def test_good(self):
        for name, (value, _) in p2pkit.DTYPES.items():
            self.assertEqual(p2pkit.check_tensor(FakeTensor(dtype="torch." + name, n=7), 0),
                             (value, 7))

    def test_not_a_tensor(self):
        with self.assertRaisesRegex(TypeError, "expected a torch.Tensor, got list"):
            p2pkit.check_tensor([1, 2], 0)

    def test_cpu_tensor(self):
        with self.assertRaisesRegex(ValueError, "on cpu, not on a CUDA device"):
            p2pkit.check_tensor(FakeTensor(cuda=False), 0)

    def test_other_gpu(self):
        with self.assertRaisesRegex(ValueError, "on cuda:1, but the communicator's GPU is cuda:0"):
            p2pkit.check_tensor(FakeTensor(index=1), 0)

    def test_not_contiguous(self):
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            p2pkit.check_tensor(FakeTensor(contiguous=False), 0)

    def test_unsupported_dtype(self):
        with self.assertRaisesRegex(ValueError, "torch.complex64 is not supported"):
            p2pkit.check_tensor(FakeTensor(dtype="torch.complex64"), 0)


@unittest.skipUnless(HAVE_GPU, "needs torch with a CUDA GPU")
class OneRankGPU(unittest.TestCase):
    """One rank (WORLD_SIZE 1): the real ctypes path, stream and pointer."""

    def test_all_reduce_one_rank(self):
        comm = p2pkit.Comm(rank=0, world_size=1, device=0, addr="127.0.0.1", port=29611,
                           secret="test")
        try:
            t = torch.arange(1000, dtype=torch.float32, device="cuda:0")
            p2pkit.all_reduce(t, op="avg", comm=comm)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(t, torch.arange(1000, dtype=torch.float32, device="cuda:0")))
            with self.assertRaisesRegex(ValueError, "not contiguous"):
                p2pkit.all_reduce(t.view(10, 100).t(), comm=comm)
        finally:
            comm.close()

    def test_abort_one_rank(self):
        comm = p2pkit.Comm(rank=0, world_size=1, device=0, addr="127.0.0.1", port=29612,
                           secret="test")
        t = torch.ones(1000, device="cuda:0")
        p2pkit.all_reduce(t, comm=comm)
        comm.abort()
        torch.cuda.synchronize()
        with self.assertRaisesRegex(ValueError, "closed"):
            p2pkit.all_reduce(t, comm=comm)


if __name__ == "__main__":
    unittest.main()
