"""What a run on torch.distributed's gloo backend needs besides its all-reduce: whether torch
is there, a free port for the rendezvous, and joining (and leaving) the process group.

torch is optional (extra ``engines``): nothing here imports it until a worker joins a group.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
from collections.abc import Iterator
from datetime import timedelta

__all__ = ["TORCH_MISSING", "free_port", "gloo_group", "require_torch", "torch_available"]

#: What to say where torch is needed but not installed.
TORCH_MISSING = (
    "PyTorch is not installed: install the optional engine with "
    "`pip install -e '.[engines]'` (on the course machines: `pip install torch==2.13.0`, "
    "a local CPU build)"
)


def torch_available() -> bool:
    """Whether torch can be imported (checked without importing it)."""
    return importlib.util.find_spec("torch") is not None


def require_torch() -> None:
    """ImportError with the install hint (:data:`TORCH_MISSING`) unless torch is installed."""
    if not torch_available():
        raise ImportError(TORCH_MISSING)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for the gloo rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def gloo_group(rank: int, world_size: int, init_method: str, timeout: float) -> Iterator[None]:
    """Join the gloo process group (one torch thread) for the ``with`` block, then leave it."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=timeout))
    try:
        yield
    finally:
        dist.destroy_process_group()
