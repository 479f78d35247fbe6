# SPDX-License-Identifier: BSD-3-Clause
"""The torch.distributed backend "p2pkit", registered when p2pkit is imported
with torch present:

    import p2pkit, torch.distributed as dist
    dist.init_process_group("cpu:gloo,cuda:p2pkit")   # under torchrun

The backend is C++ (python/p2pkit/csrc, the extension p2pkit._c10d): a
c10d::Backend over libp2pkit with ProcessGroupNCCL's behaviour, built into
the wheel when the Python that builds it has torch (pip install
--no-build-isolation .). This module only registers it, with torch's
extended API (the creator gets the group's ranks, name and pg_options):
ProcessGroupP2PKit and ProcessGroupP2PKit.Options (pg_options) are the
extension's. Without the extension "p2pkit" is still registered, and making
a group says in one line how to get it (docs/pytorch.md)."""
import os

import torch.distributed as dist

from p2pkit import load_library

__all__ = ["BACKEND_NAME", "ProcessGroupP2PKit", "Options", "available", "why_unavailable"]

BACKEND_NAME = "p2pkit"
_HOW = ("pip install --no-build-isolation . in p2pkit's source tree, with this torch installed "
        "(an isolated build has no torch to build against)")



def _unavailable(error, where):
    """The one line for an extension that failed to import with `error`
    from the package folder `where`: not built into this install, or built
    for another torch."""
    if any(n.startswith("_c10d.") for n in os.listdir(where)):
        import torch
        return (f"p2pkit: the PyTorch backend in {where} does not load with torch "
                f"{torch.__version__} ({error}); rebuild it: {_HOW}")
    return f"p2pkit: this install of p2pkit was built without its PyTorch backend; {_HOW}"


try:
    load_library()  # libp2pkit first: the extension links it ($ORIGIN)
    from p2pkit import _c10d
    _WHY = None
except ImportError as _e:
    _c10d = None
    _WHY = _unavailable(_e, os.path.dirname(os.path.abspath(__file__)))

ProcessGroupP2PKit = _c10d.ProcessGroupP2PKit if _c10d else None
Options = _c10d.ProcessGroupP2PKit.Options if _c10d else None


def available():
    """Whether the C++ backend is there (else why_unavailable() says why)."""
    return _c10d is not None


def why_unavailable():
    """None, or the one line init_process_group raises without the backend."""
    return _WHY


def _create(dist_opts, pg_options):
    """The creator torch calls for each group (extended API)."""
    if _c10d is None:
        raise RuntimeError(_WHY)
    if pg_options is not None and not isinstance(pg_options, Options):
        raise TypeError(f"p2pkit: pg_options must be a p2pkit.torch_backend.Options "
                        f"(ProcessGroupP2PKit.Options), not {type(pg_options).__name__}")
    return _c10d.ProcessGroupP2PKit(dist_opts.store, dist_opts.group_rank, dist_opts.group_size,
                                    dist_opts.timeout.total_seconds(),
                                    [int(r) for r in dist_opts.global_ranks_in_group],
                                    dist_opts.group_id, pg_options)


if BACKEND_NAME.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True, devices=["cuda"])
