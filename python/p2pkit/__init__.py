# SPDX-License-Identifier: BSD-3-Clause
"""p2pkit for PyTorch: a thin ctypes layer over libp2pkit.so. The C library
does all the work; this module finds it, checks tensors, and turns statuses
into exceptions.

    import p2pkit
    comm = p2pkit.Comm()                      # torchrun's RANK/WORLD_SIZE/...
    p2pkit.all_reduce(t, comm=comm)           # a sum, on torch.cuda.current_stream()
    p2pkit.all_gather(out, t, comm=comm)      # and broadcast, reduce,
    with p2pkit.group():                      # reduce_scatter, all_to_all,
        p2pkit.send(t, 1, comm=comm)          # all_to_allv, gather,
        p2pkit.recv(u, 1, comm=comm)          # scatter, send / recv

    uid = p2pkit.get_unique_id()              # NCCL-style: rank 0 makes an id,
    comm = p2pkit.Comm(unique_id=uid, rank=r, world_size=n)  # every rank joins

With torch installed, importing p2pkit also registers the torch.distributed
backend "p2pkit": dist.init_process_group("cpu:gloo,cuda:p2pkit"), a C++
backend (p2pkit/csrc) built into the wheel against the torch present at
build time (p2pkit/torch_backend.py, docs/pytorch.md).

The library is found at $P2PKIT_LIB, inside this package (a wheel from
`pip install .`), in the source tree's build directories, or by the dynamic
loader (libp2pkit.so.0).
"""
import ctypes
import glob
import operator
import os

__all__ = ["P2PKitError", "load_library", "version", "Comm", "all_reduce", "broadcast", "reduce",
           "all_gather", "reduce_scatter", "all_to_all", "all_to_allv", "gather", "scatter", "send", "recv", "group", "ddp_comm_hook",
           "DTYPES", "OPS", "check_tensor", "get_unique_id", "UNIQUE_ID_BYTES", "library_path"]

UNIQUE_ID_BYTES = 128  # P2PKIT_UNIQUE_ID_BYTES
INT_MAX = 2**31 - 1  # a C int: rank, device, root, peer, max_blocks
PTR_MAX = 2**64 - 1  # a pointer: stream

# p2pkit_dtype_t, keyed by the name torch gives the dtype (str(torch.float32)
# is "torch.float32"); value: (enum value, element bytes). From int8 on they go
# through NCCL only: p2pkit's own paths refuse them ("int8 needs the NCCL path").
DTYPES = {
    "float32": (0, 4), "float16": (1, 2), "bfloat16": (2, 2), "float64": (3, 8),
    "int32": (4, 4), "int64": (5, 8), "uint8": (6, 1),
    "int8": (7, 1), "uint32": (8, 4), "uint64": (9, 8),
    "float8_e4m3fn": (10, 1), "float8_e5m2": (11, 1),
}
# p2pkit_redop_t
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}

_lib = None


class P2PKitError(RuntimeError):
    """A p2pkit call failed: .status (int), .name (p2pkit_strerror), .detail
    (p2pkit_last_error, the sentence naming what was wrong)."""

    def __init__(self, call, status, name, detail):
        self.call, self.status, self.name, self.detail = call, status, name, detail
        super().__init__(f"{call}: {name}: {detail}" if detail else f"{call}: {name}")


def _candidates():
    env = os.environ.get("P2PKIT_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, n) for n in ("libp2pkit.so", "libp2pkit.so.0")]
    root = os.path.dirname(os.path.dirname(here))  # python/p2pkit -> repository
    out += sorted(glob.glob(os.path.join(root, "build*", "libp2pkit.so")))
    out += ["libp2pkit.so.0", "libp2pkit.so"]
    return out


def _declare(lib):
    c_int, c_size, c_void_p, c_char_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    sigs = {
        "p2pkit_version": (c_int, []),
        "p2pkit_strerror": (c_char_p, [c_int]),
        "p2pkit_last_error": (c_char_p, []),
        "p2pkit_dtype_size": (c_size, [c_int]),
        "p2pkit_dtype_name": (c_char_p, [c_int]),
        "p2pkit_redop_name": (c_char_p, [c_int]),
        "p2pkit_comm_opts_init": (None, [c_void_p]),
        "p2pkit_comm_init_rank": (c_int, [c_void_p, ctypes.POINTER(c_void_p)]),
        "p2pkit_comm_destroy": (c_int, [c_void_p]),
        "p2pkit_comm_abort": (c_int, [c_void_p]),
        "p2pkit_comm_rank": (c_int, [c_void_p]),
        "p2pkit_comm_size": (c_int, [c_void_p]),
        "p2pkit_comm_device": (c_int, [c_void_p]),
        "p2pkit_comm_set_max_blocks": (c_int, [c_void_p, c_int]),
        "p2pkit_comm_max_blocks": (c_int, [c_void_p]),
        "p2pkit_all_reduce": (c_int, [c_void_p, c_void_p, c_size, c_int, c_int, c_void_p, c_void_p]),
        "p2pkit_broadcast": (c_int, [c_void_p, c_void_p, c_size, c_int, c_int, c_void_p, c_void_p]),
        "p2pkit_reduce": (c_int, [c_void_p, c_void_p, c_size, c_int, c_int, c_int, c_void_p, c_void_p]),
        "p2pkit_all_gather": (c_int, [c_void_p, c_void_p, c_size, c_int, c_void_p, c_void_p]),
        "p2pkit_reduce_scatter": (c_int, [c_void_p, c_void_p, c_size, c_int, c_int, c_void_p,
                                          c_void_p]),
        "p2pkit_all_to_all": (c_int, [c_void_p, c_void_p, c_size, c_int, c_void_p, c_void_p]),
        "p2pkit_all_to_allv": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,
                                       c_int, c_void_p, c_void_p]),
        "p2pkit_gather": (c_int, [c_void_p, c_void_p, c_size, c_int, c_int, c_void_p, c_void_p]),
        "p2pkit_scatter": (c_int, [c_void_p, c_void_p, c_size, c_int, c_int, c_void_p, c_void_p]),
        "p2pkit_send": (c_int, [c_void_p, c_size, c_int, c_int, c_void_p, c_void_p]),
        "p2pkit_recv": (c_int, [c_void_p, c_size, c_int, c_int, c_void_p, c_void_p]),
        "p2pkit_group_start": (c_int, []),
        "p2pkit_group_end": (c_int, []),
        "p2pkit_comm_get_async_error": (c_int, [c_void_p, ctypes.POINTER(c_int)]),
        "p2pkit_get_unique_id": (c_int, [c_void_p]),
        "p2pkit_comm_init_rank_config": (c_int, [ctypes.POINTER(c_void_p), c_int, c_void_p, c_int,
                                                 c_void_p]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def load_library():
    """The loaded libp2pkit (loaded once). OSError listing where it looked."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        _declare(lib)
        _lib = lib
        global _lib_path
        _lib_path = path
        return lib
    raise OSError("p2pkit: cannot load libp2pkit.so; set P2PKIT_LIB to its path. Tried: " +
                  "; ".join(tried))


_lib_path = None


def library_path():
    """Where the loaded libp2pkit came from (loads it first)."""
    load_library()
    return _lib_path


def _check(call, status):
    if status != 0:
        lib = load_library()
        name = (lib.p2pkit_strerror(status) or b"?").decode()
        detail = (lib.p2pkit_last_error() or b"").decode()
        raise P2PKitError(call, status, name, detail)


def _int_arg(where, name, value, lo, hi, hint=""):
    """`value` as a whole number in lo..hi, checked before it reaches ctypes,
    which would keep only its low bits (2**32 + 5 reaches a C int as 5).
    TypeError for what is not an integer, bool included (as torch refuses
    True for an int); ValueError naming the argument, its value and the
    range. `hint` follows the range in the message."""
    if isinstance(value, bool):
        raise TypeError(f"p2pkit: {where}: {name} must be an int, got bool ({value})")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"p2pkit: {where}: {name} must be an int, got "
                        f"{type(value).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"p2pkit: {where}: {name}={v} is out of range: expected {lo} to {hi}"
                         + (f" ({hint})" if hint else ""))
    return v


def _text_arg(where, name, value):
    """A str argument as the C string ctypes passes: TypeError for bytes or
    anything else, ValueError for a NUL, which would cut the C string short.
    The message does not repeat the value (it may be a secret)."""
    if not isinstance(value, str):
        raise TypeError(f"p2pkit: {where}: {name} must be a str, got {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"p2pkit: {where}: {name} holds a NUL character")
    return value.encode()


def _next_to_master_port():
    """MASTER_PORT + 1 (torchrun's store listens on MASTER_PORT itself), or
    None when MASTER_PORT is unset or empty. ValueError naming MASTER_PORT
    when it is not a decimal port below 65535."""
    v = os.environ.get("MASTER_PORT", "")
    if not v:
        return None
    if not (v.isascii() and v.isdigit() and len(v) <= 10 and 1 <= int(v) <= 65534):
        shown = v if len(v) <= 32 else v[:32] + "..."
        raise ValueError(f"p2pkit: Comm: MASTER_PORT={shown!r} is not a port p2pkit can follow: "
                         f"expected a decimal number from 1 to 65534 (p2pkit listens on "
                         f"MASTER_PORT + 1); fix it or pass port=")
    return int(v) + 1


def version():
    """The library's version code (MAJOR*10000 + MINOR*100 + PATCH)."""
    return load_library().p2pkit_version()


def __getattr__(name):
    """p2pkit.__version__: the loaded library's version as "MAJOR.MINOR.PATCH"
    (include/p2pkit.h holds the one copy; the wheel's metadata reads it too)."""
    if name == "__version__":
        v = version()
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    raise AttributeError(f"module 'p2pkit' has no attribute {name!r}")


class _CommOpts(ctypes.Structure):  # p2pkit_comm_opts_t (P2PKIT_COMM_OPTS_VERSION 1)
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint),
                ("nranks", ctypes.c_int), ("rank", ctypes.c_int), ("device", ctypes.c_int),
                ("addr", ctypes.c_char_p), ("port", ctypes.c_int), ("secret", ctypes.c_char_p),
                ("timeout_s", ctypes.c_int)]


class _Config(ctypes.Structure):  # p2pkit_config_t (P2PKIT_CONFIG_VERSION 1)
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint), ("device", ctypes.c_int),
                ("timeout_s", ctypes.c_int), ("max_blocks", ctypes.c_int),
                ("reserved", ctypes.c_int * 11)]


def get_unique_id():
    """A new communicator id (bytes, UNIQUE_ID_BYTES long), as
    ncclGetUniqueId: make it in the process that will be rank 0 (it opens
    rank 0's listening socket at once), hand it to every rank, and each
    passes it to Comm(unique_id=..., rank=..., world_size=...)."""
    buf = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
    _check("p2pkit_get_unique_id", load_library().p2pkit_get_unique_id(buf))
    return buf.raw


def _unique_id_buffer(uid):
    if not isinstance(uid, (bytes, bytearray)):
        raise TypeError(f"p2pkit: unique_id must be bytes from p2pkit.get_unique_id(), got "
                        f"{type(uid).__name__}")
    if len(uid) != UNIQUE_ID_BYTES:
        raise ValueError(f"p2pkit: unique_id has {len(uid)} bytes, expected {UNIQUE_ID_BYTES} (pass "
                         f"what p2pkit.get_unique_id() returned, whole)")
    return ctypes.create_string_buffer(bytes(uid), UNIQUE_ID_BYTES)


def _comm_ints(rank, world_size, device, timeout_s, max_blocks):
    """Comm's integer arguments, each None (the default) or checked."""
    def opt(name, v, lo, hi, hint=""):
        return None if v is None else _int_arg("Comm", name, v, lo, hi, hint)
    return (opt("rank", rank, 0, INT_MAX), opt("world_size", world_size, 1, INT_MAX),
            opt("device", device, 0, INT_MAX, "None: LOCAL_RANK, or the current device"),
            opt("timeout_s", timeout_s, 1, 86400, "None: P2PKIT_TIMEOUT"),
            opt("max_blocks", max_blocks, 0, INT_MAX, "0: no cap"))


class Comm:
    """One rank of a process-per-GPU communicator. Collective: every rank
    constructs it.

    With unique_id (bytes from get_unique_id()): rank and world_size are
    required and nothing comes from the launcher's environment
    (p2pkit_comm_init_rank_config); device None: the current CUDA device.

    Without: unset arguments come from the launcher's environment (torchrun:
    RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; secret
    P2PKIT_JOB_SECRET, never TORCHELASTIC_RUN_ID); what is passed always
    wins. Off loopback the secret must hold 128 bits (32 hex digits:
    `p2pkit env --new-secret`).
    Next to torch.distributed: torchrun's store already listens on
    MASTER_PORT, so port=None means MASTER_PORT + 1 here (the C library's
    default is MASTER_PORT itself); pass port= to choose.

    timeout_s: seconds this communicator waits for a peer (the rendezvous,
    exchanges, every wait of a call) before failing; None: P2PKIT_TIMEOUT,
    else 600 (PyTorch's default for NCCL).

    max_blocks: the most thread blocks each collective kernel takes (see
    set_max_blocks); None: P2PKIT_MAX_BLOCKS, else no cap.

    Integer arguments must be ints (not bool, not float) within their range,
    else TypeError / ValueError naming the argument, before anything reaches
    the C library; addr and secret must be str (bytes are refused, not
    guessed at), without a NUL."""

    def __init__(self, rank=None, world_size=None, device=None, addr=None, port=None,
                 secret=None, timeout_s=None, max_blocks=None, unique_id=None):
        rank, world_size, device, timeout_s, max_blocks = _comm_ints(
            rank, world_size, device, timeout_s, max_blocks)
        lib = load_library()
        if unique_id is not None:
            self._init_from_id(lib, unique_id, rank, world_size, device, timeout_s, max_blocks,
                               (addr, port, secret))
            return
        o = _CommOpts()
        lib.p2pkit_comm_opts_init(ctypes.byref(o))
        o.size = ctypes.sizeof(_CommOpts)  # this binding's layout: the library refuses another
        if rank is not None:
            o.rank = rank
        if world_size is not None:
            o.nranks = world_size
        if device is not None:
            o.device = device
        if addr is not None:
            o.addr = _text_arg("Comm", "addr", addr)
        if port is None:
            port = _next_to_master_port()
        else:
            port = _int_arg("Comm", "port", port, 1, 65535)
        if port is not None:
            o.port = port
        if secret is not None:
            o.secret = _text_arg("Comm", "secret", secret)
        if timeout_s is not None:
            o.timeout_s = timeout_s
        h = ctypes.c_void_p()
        _check("p2pkit_comm_init_rank", lib.p2pkit_comm_init_rank(ctypes.byref(o), ctypes.byref(h)))
        self._h = h
        self.rank = lib.p2pkit_comm_rank(h)
        self.size = lib.p2pkit_comm_size(h)
        self.device = lib.p2pkit_comm_device(h)
        if max_blocks is not None:
            self.set_max_blocks(max_blocks)

    def _init_from_id(self, lib, uid, rank, world_size, device, timeout_s, max_blocks, unused):
        if any(v is not None for v in unused):
            raise ValueError("p2pkit: Comm(unique_id=...) takes no addr, port or secret (the id "
                             "carries them)")
        if rank is None or world_size is None:
            raise ValueError("p2pkit: Comm(unique_id=...) needs rank= and world_size=")
        buf = _unique_id_buffer(uid)
        cfg = _Config()
        cfg.size, cfg.version = ctypes.sizeof(_Config), 1
        cfg.device = -1 if device is None else device
        cfg.timeout_s = -1 if timeout_s is None else timeout_s
        cfg.max_blocks = -1 if max_blocks is None else max_blocks
        h = ctypes.c_void_p()
        _check("p2pkit_comm_init_rank_config",
               lib.p2pkit_comm_init_rank_config(ctypes.byref(h), world_size, buf, rank,
                                                ctypes.byref(cfg)))
        self._h = h
        self.rank = lib.p2pkit_comm_rank(h)
        self.size = lib.p2pkit_comm_size(h)
        self.device = lib.p2pkit_comm_device(h)

    def set_max_blocks(self, n):
        """Cap every collective kernel of this communicator at n thread
        blocks (0: no cap), so all-reduces running beside the backward pass
        (ddp_comm_hook) leave it multiprocessors. Every rank must set the
        same value at the same point; not inside a group."""
        n = _int_arg("set_max_blocks", "n", n, 0, INT_MAX, "0: no cap")
        _check("p2pkit_comm_set_max_blocks", load_library().p2pkit_comm_set_max_blocks(self.handle, n))

    @property
    def max_blocks(self):
        """The grid cap in force (0: none)."""
        return load_library().p2pkit_comm_max_blocks(self.handle)

    @property
    def handle(self):
        if self._h is None:
            raise ValueError("p2pkit: the communicator was closed")
        return self._h

    def close(self):
        """Collective: every rank closes it."""
        if self._h is not None:
            h, self._h = self._h, None
            _check("p2pkit_comm_destroy", load_library().p2pkit_comm_destroy(h))

    def abort(self):
        """Give the communicator up without waiting for any peer, as
        ncclCommAbort: for a failed job (a peer died or hangs), not for
        teardown. Not collective; returns within about two seconds. The
        ranks waiting on this one fail at once or at their timeout."""
        if self._h is not None:
            h, self._h = self._h, None
            _check("p2pkit_comm_abort", load_library().p2pkit_comm_abort(h))

    def async_error(self):
        """None, or the P2PKitError a collective left on the device."""
        s = ctypes.c_int(0)
        _check("p2pkit_comm_get_async_error",
               load_library().p2pkit_comm_get_async_error(self.handle, ctypes.byref(s)))
        if s.value:
            try:
                _check("collective", s.value)
            except P2PKitError as e:
                return e
        return None

    def __repr__(self):
        return f"p2pkit.Comm(rank={self.rank}, size={self.size}, device={self.device})"


def _dtype_key(dtype):
    return str(dtype).replace("torch.", "")


def check_tensor(t, device):
    """Raise TypeError/ValueError unless `t` is a contiguous CUDA tensor of a
    supported type on GPU `device`. Returns (dtype enum, element count).
    Works on anything tensor-like (is_cuda, device, dtype, is_contiguous(),
    numel(), data_ptr())."""
    for attr in ("is_cuda", "device", "dtype", "is_contiguous", "numel", "data_ptr"):
        if not hasattr(t, attr):
            raise TypeError(f"p2pkit: expected a torch.Tensor, got {type(t).__name__}")
    if not t.is_cuda:
        raise ValueError(f"p2pkit: the tensor is on {t.device}, not on a CUDA device")
    idx = getattr(t.device, "index", None)
    if idx != device:
        raise ValueError(f"p2pkit: the tensor is on {t.device}, but the communicator's GPU is "
                         f"cuda:{device}")
    if not t.is_contiguous():
        raise ValueError("p2pkit: the tensor is not contiguous (call .contiguous() first; "
                         "p2pkit reduces the memory in place)")
    key = _dtype_key(t.dtype)
    if key not in DTYPES:
        raise ValueError(f"p2pkit: data type {t.dtype} is not supported "
                         f"(supported: {', '.join(sorted(DTYPES))})")
    return DTYPES[key][0], int(t.numel())


def _current_stream(device):
    import torch  # only here: the rest of the module works without torch
    return torch.cuda.current_stream(device).cuda_stream


def _op(name, op):
    if op not in OPS:
        raise ValueError(f"p2pkit: {name}: operation {op!r} is not one of {', '.join(OPS)}")
    return OPS[op]


def _tensors(name, comm, *tensors):
    """Check the communicator and every tensor (the same data type);
    (dtype enum, [element counts])."""
    if comm is None:
        raise ValueError(f"p2pkit: {name} needs a p2pkit.Comm")
    kinds = [check_tensor(t, comm.device) for t in tensors]
    for t, (d, _) in zip(tensors[1:], kinds[1:]):
        if d != kinds[0][0]:
            raise ValueError(f"p2pkit: {name}: the tensors' data types differ ({tensors[0].dtype} "
                             f"and {t.dtype})")
    return kinds[0][0], [n for _, n in kinds]


def _rank_arg(name, what, value, comm):
    """A peer's rank (root, peer): one of the communicator's ranks."""
    return _int_arg(name, what, value, 0, comm.size - 1, f"a rank of the communicator's {comm.size}")


def _run(name, stream, comm, *args):
    """Call libp2pkit's `name` with args + (comm, stream); stream None: the
    current torch stream of the communicator's GPU, else a cudaStream_t as
    an int (0: the legacy default stream)."""
    if stream is None:
        stream = _current_stream(comm.device)
    else:
        stream = _int_arg(name.replace("p2pkit_", ""), "stream", stream, 0, PTR_MAX,
                          "a cudaStream_t as an int")
    _check(name, getattr(load_library(), name)(*args, comm.handle, stream))


def all_reduce(tensor, op="sum", comm=None, stream=None):
    """Reduce `tensor` in place over the communicator's ranks (op: "sum",
    the default as in NCCL and torch.distributed, "prod", "min", "max",
    "avg"), ordered on `stream` (a raw cudaStream_t as int; None:
    torch.cuda.current_stream of the tensor's GPU). Returns the tensor.
    Asynchronous like NCCL: the result is there for later work on that
    stream. The other collectives below take `comm` and `stream` the same
    way, and every reduction sums unless `op` says otherwise."""
    dtype, (count,) = _tensors("all_reduce", comm, tensor)
    code = _op("all_reduce", op)
    if count:
        ptr = tensor.data_ptr()
        _run("p2pkit_all_reduce", stream, comm, ptr, ptr, count, dtype, code)
    return tensor


def broadcast(tensor, root, comm=None, stream=None):
    """Every rank's `tensor` becomes rank `root`'s, in place. Returns it."""
    dtype, (count,) = _tensors("broadcast", comm, tensor)
    root = _rank_arg("broadcast", "root", root, comm)
    if count:
        ptr = tensor.data_ptr()
        _run("p2pkit_broadcast", stream, comm, ptr, ptr, count, dtype, root)
    return tensor


def reduce(tensor, root, op="sum", comm=None, stream=None):
    """Rank `root`'s `tensor` becomes the reduction of every rank's, in
    place; the other ranks' tensors are left as they were. Returns it."""
    dtype, (count,) = _tensors("reduce", comm, tensor)
    code = _op("reduce", op)
    root = _rank_arg("reduce", "root", root, comm)
    if count:
        ptr = tensor.data_ptr()
        _run("p2pkit_reduce", stream, comm, ptr, ptr, count, dtype, code, root)
    return tensor


def all_gather(output, input, comm=None, stream=None):
    """`output` (comm.size times `input`'s elements) becomes every rank's
    `input` in rank order. Returns `output`."""
    dtype, (nout, nin) = _tensors("all_gather", comm, output, input)
    if nout != comm.size * nin:
        raise ValueError(f"p2pkit: all_gather: the output has {nout} elements, expected "
                         f"{comm.size} x {nin} (the input's)")
    if nin:
        _run("p2pkit_all_gather", stream, comm, input.data_ptr(), output.data_ptr(), nin, dtype)
    return output


def reduce_scatter(output, input, op="sum", comm=None, stream=None):
    """`output` becomes this rank's share (rank r: elements r*n .. r*n+n-1,
    n = output's elements) of the reduction of every rank's `input`
    (comm.size times n elements). Returns `output`."""
    dtype, (nout, nin) = _tensors("reduce_scatter", comm, output, input)
    code = _op("reduce_scatter", op)
    if nin != comm.size * nout:
        raise ValueError(f"p2pkit: reduce_scatter: the input has {nin} elements, expected "
                         f"{comm.size} x {nout} (the output's)")
    if nout:
        _run("p2pkit_reduce_scatter", stream, comm, input.data_ptr(), output.data_ptr(), nout,
             dtype, code)
    return output


def all_to_all(output, input, comm=None, stream=None):
    """Block p of `input` (comm.size equal blocks) goes to rank p, which
    places it as block r (this rank) of its `output`. Returns `output`."""
    dtype, (nout, nin) = _tensors("all_to_all", comm, output, input)
    if nout != nin or nin % comm.size:
        raise ValueError(f"p2pkit: all_to_all: the input and output need the same number of "
                         f"elements, a multiple of {comm.size} (got {nin} and {nout})")
    if nin:
        _run("p2pkit_all_to_all", stream, comm, input.data_ptr(), output.data_ptr(),
             nin // comm.size, dtype)
    return output


def _splits(name, what, counts, displs, size, numel):
    """(counts, displacements) as C arrays of `size` size_t: whole numbers
    0 or more (a bool or float a TypeError, as every integer argument),
    displacements packed in rank order when None; every block inside the
    tensor's `numel` elements."""
    arg = "send" if what == "send" else "recv"  # send_counts, recv_counts, send_displs...
    counts = [_int_arg(name, f"{arg}_counts[{i}]", v, 0, 2**63 - 1) for i, v in enumerate(counts)]
    if displs is not None:
        displs = [_int_arg(name, f"{arg}_displs[{i}]", v, 0, 2**63 - 1)
                  for i, v in enumerate(displs)]
    if len(counts) != size or (displs is not None and len(displs) != size):
        raise ValueError(f"p2pkit: {name}: {what} counts and displacements need {size} entries "
                         f"(one per rank), got {len(counts)} and "
                         f"{size if displs is None else len(displs)}")
    if displs is None:
        displs = [sum(counts[:p]) for p in range(size)]
    for p, (c, d) in enumerate(zip(counts, displs)):
        if c and d + c > numel:
            raise ValueError(f"p2pkit: {name}: the {what} block of rank {p} (elements {d} to "
                             f"{d + c}) lies beyond the tensor's {numel} elements")
    arr = ctypes.c_size_t * size
    return arr(*counts), arr(*displs)


def all_to_allv(output, input, send_counts, recv_counts, send_displs=None, recv_displs=None,
                comm=None, stream=None):
    """Uneven all-to-all (p2pkit_all_to_allv): send_counts[p] elements of
    `input` from send_displs[p] go to rank p, which places them in its
    `output` at its recv_displs[this rank]; this rank's recv_counts[p] must
    be what rank p sends it. Counts and displacements in elements, one per
    rank; displacements None: the blocks packed in rank order. Zeros are
    allowed and the counts may differ on every rank. Returns `output`."""
    dtype, (nout, nin) = _tensors("all_to_allv", comm, output, input)
    sc, sd = _splits("all_to_allv", "send", send_counts, send_displs, comm.size, nin)
    rc, rd = _splits("all_to_allv", "receive", recv_counts, recv_displs, comm.size, nout)
    _run("p2pkit_all_to_allv", stream, comm, input.data_ptr(), sc, sd, output.data_ptr(), rc, rd,
         dtype)
    return output


def _rooted(name, big, small, root, comm):
    """The root's whole tensor (`big`: comm.size times `small`'s elements;
    may be None off the root) and every rank's share: (dtype, count, big's
    pointer or None, root)."""
    if comm is None:
        raise ValueError(f"p2pkit: {name} needs a p2pkit.Comm")
    root = _rank_arg(name, "root", root, comm)
    if comm.rank != root:
        dtype, (count,) = _tensors(name, comm, small)
        return dtype, count, None, root
    if big is None:
        raise ValueError(f"p2pkit: {name}: the root needs its tensor of {comm.size} shares")
    dtype, (nbig, count) = _tensors(name, comm, big, small)
    if nbig != comm.size * count:
        raise ValueError(f"p2pkit: {name}: the root's tensor has {nbig} elements, expected "
                         f"{comm.size} x {count}")
    return dtype, count, big.data_ptr(), root


def gather(output, input, root, comm=None, stream=None):
    """Every rank's `input` lands in rank `root`'s `output` (comm.size times
    its elements, in rank order; None on the other ranks), moving only
    what the root needs (p2pkit_gather). Returns `output`."""
    dtype, count, out, root = _rooted("gather", output, input, root, comm)
    if count:
        _run("p2pkit_gather", stream, comm, input.data_ptr(), out, count, dtype, root)
    return output


def scatter(output, input, root, comm=None, stream=None):
    """Rank `root`'s `input` (comm.size blocks of `output`'s elements; None
    on the other ranks) is cut in rank order, block r into rank r's
    `output` (p2pkit_scatter). Returns `output`."""
    dtype, count, inp, root = _rooted("scatter", input, output, root, comm)
    if count:
        _run("p2pkit_scatter", stream, comm, inp, output.data_ptr(), count, dtype, root)
    return output


def send(tensor, peer, comm=None, stream=None):
    """Send `tensor` to rank `peer`, whose matching recv takes it. A rank
    that sends and receives at once puts both inside one `with group():`."""
    dtype, (count,) = _tensors("send", comm, tensor)
    peer = _rank_arg("send", "peer", peer, comm)
    if count:
        _run("p2pkit_send", stream, comm, tensor.data_ptr(), count, dtype, peer)
    return tensor


def recv(tensor, peer, comm=None, stream=None):
    """Receive into `tensor` what rank `peer` sends (the same element count)."""
    dtype, (count,) = _tensors("recv", comm, tensor)
    peer = _rank_arg("recv", "peer", peer, comm)
    if count:
        _run("p2pkit_recv", stream, comm, tensor.data_ptr(), count, dtype, peer)
    return tensor


class group:
    """`with p2pkit.group(): ...` brackets calls that go together (a send
    and a receive of one rank; one process's calls for several GPUs), as
    p2pkit_group_start / p2pkit_group_end. The group ends even when the
    block raises; its own failure is raised unless the block's is."""

    def __enter__(self):
        _check("p2pkit_group_start", load_library().p2pkit_group_start())
        return self

    def __exit__(self, kind, value, tb):
        status = load_library().p2pkit_group_end()
        if kind is None:
            _check("p2pkit_group_end", status)
        return False


def ddp_comm_hook(state, bucket):
    """DistributedDataParallel communication hook on a Comm of your own:
    ddp_model.register_comm_hook(comm, p2pkit.ddp_comm_hook). (With the
    torch.distributed backend, DDP(process_group=<a p2pkit group>) needs no
    hook.) Averages the
    bucket's flat gradient buffer in place on the current stream and returns a
    completed future (the work is ordered on the stream DDP uses next). The
    bucket all-reduces take the communicator's grid cap (Comm(max_blocks=)):
    in the C library's gradient sync half the multiprocessors kept the
    backward pass fastest on the example MLP (src/ddp); under PyTorch the
    best cap is not measured."""
    import torch
    buf = bucket.buffer()
    all_reduce(buf, op="avg", comm=state)
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


# The torch.distributed backend "p2pkit", registered when torch is there;
# p2pkit itself works without torch.
try:
    import torch.distributed as _dist  # noqa: F401
    _HAVE_TORCH_DIST = _dist.is_available()
except (ImportError, OSError):  # no torch, or a torch that cannot load
    _HAVE_TORCH_DIST = False
if _HAVE_TORCH_DIST:
    try:
        from . import torch_backend  # noqa: E402,F401  (registers "p2pkit")
    except Exception as _e:  # noqa: BLE001 -- p2pkit itself must still import
        import warnings
        warnings.warn(f"p2pkit: the torch.distributed backend is not registered: {_e!r}")
