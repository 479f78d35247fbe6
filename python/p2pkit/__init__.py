"""p2pkit for PyTorch: a thin ctypes layer over libp2pkit.so (no compiled
extension). The C library does all the work; this module finds it, checks
tensors, and turns statuses into exceptions.

    import p2pkit
    comm = p2pkit.Comm()                      # torchrun's RANK/WORLD_SIZE/...
    p2pkit.all_reduce(t, op="avg", comm=comm) # on torch.cuda.current_stream()
    ddp_model.register_comm_hook(comm, p2pkit.ddp_comm_hook)

The library is found at $P2PKIT_LIB, next to this package, in the source
tree's build directories, or by the dynamic loader (libp2pkit.so.0).
"""
import ctypes
import glob
import os

__all__ = ["P2PKitError", "load_library", "version", "Comm", "all_reduce", "ddp_comm_hook",
           "DTYPES", "OPS", "check_tensor"]

# p2pkit_dtype_t, keyed by the name torch gives the dtype (str(torch.float32)
# is "torch.float32"); value: (enum value, element bytes).
DTYPES = {
    "float32": (0, 4), "float16": (1, 2), "bfloat16": (2, 2), "float64": (3, 8),
    "int32": (4, 4), "int64": (5, 8), "uint8": (6, 1),
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
        "p2pkit_comm_rank": (c_int, [c_void_p]),
        "p2pkit_comm_size": (c_int, [c_void_p]),
        "p2pkit_comm_device": (c_int, [c_void_p]),
        "p2pkit_comm_set_max_blocks": (c_int, [c_void_p, c_int]),
        "p2pkit_comm_max_blocks": (c_int, [c_void_p]),
        "p2pkit_all_reduce": (c_int, [c_void_p, c_void_p, c_size, c_int, c_int, c_void_p, c_void_p]),
        "p2pkit_comm_get_async_error": (c_int, [c_void_p, ctypes.POINTER(c_int)]),
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
        return lib
    raise OSError("p2pkit: cannot load libp2pkit.so; set P2PKIT_LIB to its path. Tried: " +
                  "; ".join(tried))


def _check(call, status):
    if status != 0:
        lib = load_library()
        name = (lib.p2pkit_strerror(status) or b"?").decode()
        detail = (lib.p2pkit_last_error() or b"").decode()
        raise P2PKitError(call, status, name, detail)


def version():
    """The library's version code (MAJOR*10000 + MINOR*100 + PATCH)."""
    return load_library().p2pkit_version()


class _CommOpts(ctypes.Structure):  # p2pkit_comm_opts_t
    _fields_ = [("nranks", ctypes.c_int), ("rank", ctypes.c_int), ("device", ctypes.c_int),
                ("addr", ctypes.c_char_p), ("port", ctypes.c_int), ("secret", ctypes.c_char_p),
                ("timeout_s", ctypes.c_int)]


class Comm:
    """One rank of a process-per-GPU communicator. Unset arguments come from
    the launcher's environment (torchrun: RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT; secret P2PKIT_JOB_SECRET or TORCHELASTIC_RUN_ID).
    Collective: every rank constructs it. Next to torch.distributed: torchrun's
    store already listens on MASTER_PORT, so port=None means MASTER_PORT + 1
    here (the C library's default is MASTER_PORT itself); pass port= to choose.
    max_blocks: the most thread blocks each collective kernel takes (see
    set_max_blocks); None: P2PKIT_MAX_BLOCKS, else no cap."""

    def __init__(self, rank=None, world_size=None, device=None, addr=None, port=None,
                 secret=None, timeout_s=None, max_blocks=None):
        lib = load_library()
        o = _CommOpts()
        lib.p2pkit_comm_opts_init(ctypes.byref(o))
        if rank is not None:
            o.rank = int(rank)
        if world_size is not None:
            o.nranks = int(world_size)
        if device is not None:
            o.device = int(device)
        if addr is not None:
            o.addr = addr.encode()
        if port is None and os.environ.get("MASTER_PORT", "").isdigit():
            port = int(os.environ["MASTER_PORT"]) + 1
        if port is not None:
            o.port = int(port)
        if secret is not None:
            o.secret = secret.encode()
        if timeout_s is not None:
            o.timeout_s = int(timeout_s)
        h = ctypes.c_void_p()
        _check("p2pkit_comm_init_rank", lib.p2pkit_comm_init_rank(ctypes.byref(o), ctypes.byref(h)))
        self._h = h
        self.rank = lib.p2pkit_comm_rank(h)
        self.size = lib.p2pkit_comm_size(h)
        self.device = lib.p2pkit_comm_device(h)
        if max_blocks is not None:
            self.set_max_blocks(max_blocks)

    def set_max_blocks(self, n):
        """Cap every collective kernel of this communicator at n thread
        blocks (0: no cap), so all-reduces running beside the backward pass
        (ddp_comm_hook) leave it multiprocessors. Every rank must set the
        same value at the same point; not inside a group."""
        _check("p2pkit_comm_set_max_blocks",
               load_library().p2pkit_comm_set_max_blocks(self.handle, int(n)))

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


def all_reduce(tensor, op="avg", comm=None, stream=None):
    """Reduce `tensor` in place over the communicator's ranks, ordered on
    `stream` (a raw cudaStream_t as int; None: torch.cuda.current_stream of
    the tensor's GPU). Returns the tensor. Asynchronous like NCCL: the result
    is there for later work on that stream."""
    if comm is None:
        raise ValueError("p2pkit: all_reduce needs a p2pkit.Comm")
    if op not in OPS:
        raise ValueError(f"p2pkit: operation {op!r} is not one of {', '.join(OPS)}")
    dtype, count = check_tensor(tensor, comm.device)
    if count == 0:
        return tensor
    if stream is None:
        stream = _current_stream(comm.device)
    ptr = tensor.data_ptr()
    _check("p2pkit_all_reduce",
           load_library().p2pkit_all_reduce(ptr, ptr, count, dtype, OPS[op], comm.handle, stream))
    return tensor


def ddp_comm_hook(state, bucket):
    """DistributedDataParallel communication hook:
    ddp_model.register_comm_hook(comm, p2pkit.ddp_comm_hook). Averages the
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
