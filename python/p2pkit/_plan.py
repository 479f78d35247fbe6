"""What the torch.distributed backend does with a call, decided from plain
values (data type names, operation names, sizes) so that it can be tested
without torch: p2pkit itself, p2pkit after a local step (a pre-scale, a
reinterpretation of the bytes), or NCCL, with the reason.

Data type names are torch's without "torch." ("float32", "bool",
"complex64"); operation names are torch.distributed.ReduceOp's, lower case
("sum", "avg", "premul_sum", "band"...)."""
from . import INT_MAX, _int_arg

# p2pkit_dtype_t values (p2pkit.h), by torch's name for the type.
NATIVE = {"float32": 0, "float16": 1, "bfloat16": 2, "float64": 3, "int32": 4, "int64": 5,
          "uint8": 6}
# p2pkit_redop_t values.
REDOPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}
# torch's ReduceOp names (RedOpType) to p2pkit's.
TORCH_OPS = {"sum": "sum", "product": "prod", "min": "min", "max": "max", "avg": "avg",
             "premul_sum": "sum"}
# Complex types reduce as pairs of reals, for the sums only (as NCCL).
COMPLEX = {"complex64": "float32", "complex128": "float64", "complex32": "float16"}
# bool: one byte; any-true / all-true as NCCL does it.
BOOL_OPS = {"sum": "max", "max": "max", "product": "min", "min": "min"}


class Plan:
    """kind: "p2pkit" or "nccl". For p2pkit: dtype and op (p2pkit's
    values), view ("real" for complex as float pairs, "uint8" for bool,
    None), prescale (True: multiply by the PREMUL_SUM factor first).
    For nccl: reason (a sentence)."""

    def __init__(self, kind, dtype=None, op=None, view=None, prescale=False, reason=None):
        self.kind, self.dtype, self.op, self.view = kind, dtype, op, view
        self.prescale, self.reason = prescale, reason

    def __repr__(self):
        if self.kind == "nccl":
            return f"Plan(nccl: {self.reason})"
        return f"Plan(p2pkit dtype={self.dtype} op={self.op} view={self.view} prescale={self.prescale})"


def _nccl(reason):
    return Plan("nccl", reason=reason)


def reduction(dtype, op):
    """How to reduce `dtype` with torch's operation `op` (all-reduce,
    reduce, reduce-scatter)."""
    op = op.lower()
    if op not in TORCH_OPS:
        return _nccl(f"p2pkit has no {op.upper()} reduction")
    if dtype == "bool":
        if op not in BOOL_OPS:
            return _nccl(f"{op.upper()} of bool tensors")
        return Plan("p2pkit", NATIVE["uint8"], REDOPS[BOOL_OPS[op]], view="uint8")
    prescale = op == "premul_sum"
    if dtype in COMPLEX:
        if op not in ("sum", "avg", "premul_sum"):
            return _nccl(f"{op.upper()} of complex tensors")
        base = COMPLEX[dtype]
        if base not in NATIVE:
            return _nccl(f"{dtype} (p2pkit has no {base})")
        return Plan("p2pkit", NATIVE[base], REDOPS[TORCH_OPS[op]], view="real", prescale=prescale)
    if dtype not in NATIVE:
        return _nccl(f"p2pkit does not reduce {dtype}")
    if prescale and NATIVE[dtype] >= NATIVE["int32"]:
        return _nccl(f"PREMUL_SUM of {dtype} (a scale factor on integers)")
    return Plan("p2pkit", NATIVE[dtype], REDOPS[TORCH_OPS[op]], prescale=prescale)


def movement(dtype):
    """Broadcast, all-gather, all-to-all, send/recv, scatter, gather: any
    data type moves as its bytes."""
    return Plan("p2pkit", NATIVE.get(dtype, NATIVE["uint8"]),
                view=None if dtype in NATIVE else "uint8")


def all_to_all(nranks, in_numel, out_numel, in_splits, out_splits):
    """all_to_all_single: p2pkit for equal blocks, NCCL for uneven splits.
    ValueError for arguments no backend could take; a split size that is
    not a whole number (bool included) is a TypeError, one below 0 a
    ValueError, as p2pkit.Comm's integer arguments."""
    nranks = _int_arg("all_to_all", "nranks", nranks, 1, INT_MAX)
    in_splits, out_splits = list(in_splits or []), list(out_splits or [])
    for name, splits in (("input", in_splits), ("output", out_splits)):
        splits[:] = [_int_arg("all_to_all", f"{name}_splits[{i}]", v, 0, 2**63 - 1)
                     for i, v in enumerate(splits)]
    for name, splits, numel in (("input", in_splits, in_numel), ("output", out_splits, out_numel)):
        if splits and len(splits) != nranks:
            raise ValueError(f"all_to_all: {len(splits)} {name} splits for {nranks} ranks")
    even = True
    for splits, numel in ((in_splits, in_numel), (out_splits, out_numel)):
        if not splits:
            if numel % nranks:
                raise ValueError(f"all_to_all: {numel} elements do not split evenly over "
                                 f"{nranks} ranks (give split sizes)")
        elif len(set(splits)) != 1:
            even = False
    if even and in_numel != out_numel:
        return _nccl(f"all_to_all with {in_numel} input and {out_numel} output elements")
    if not even:
        return _nccl("all_to_all with uneven split sizes")
    return Plan("p2pkit")


def same_sizes(what, numels):
    """List forms (all_gather into a list, reduce_scatter from a list,
    all_to_all of lists): p2pkit when every tensor has the same size."""
    if len(set(numels)) > 1:
        return _nccl(f"{what} with tensors of different sizes")
    return Plan("p2pkit")
