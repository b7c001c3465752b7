"""The shared-memory all-reduce's two steps run on their own in processes: who holds what,
and how many bytes each read, after the reduce-scatter and after the all-gather.

Examples
--------
>>> out = run_shm_collectives(np.arange(8.0).reshape(2, 4), start_method="fork")
>>> out["all_gather"].tolist()
[[4.0, 6.0, 8.0, 10.0], [4.0, 6.0, 8.0, 10.0]]
>>> out["bytes_in"].sum(axis=0).tolist()   # (N - 1) n bytes per step over the workers
[32, 32]
"""

from __future__ import annotations

import numpy as np

from ..._validate import check_int, check_positive, check_type
from ..allreduce import ShmAllReduce
from ..engine.launch import Launcher
from ..engine.workers import Fault, check_start_method

__all__ = ["run_shm_collectives"]


def run_shm_collectives(rows, *, fault: Fault | None = None, start_method: str | None = None,
                        timeout: float = 30.0) -> dict:
    """Run :class:`~course_lib.parallel.allreduce.ShmAllReduce`'s two steps in ``N``
    processes; what each holds and counted.

    Worker ``r`` starts with ``rows[r]``, calls ``reduce_scatter()``, keeps a copy of its
    chunk of the sum, then ``all_gather()``.

    The rows keep their dtype (float16, float32 or float64; integers become float64): the
    shared buffers are in that dtype, ``bytes_in`` counts its bytes (float16 moves half of
    float32's), and the sum is added in rank order *in that dtype*, each partial sum rounded
    to it (:func:`course_lib.parallel.partition.sum_rows`), as NCCL's ring adds float16
    gradients hop by hop in float16 (no float32 accumulator). A float16 sum can lose digits
    and overflow to ``inf`` above 65,504 (:data:`course_lib.precision.FLOAT16_MAX`);
    :func:`course_lib.precision.allreduce_in` is the one-process reference.

    Parameters
    ----------
    rows : array_like, shape (N, n)
        One row per worker (``N >= 1`` processes), float16, float32 or float64.
    fault : course_lib.parallel.engine.workers.Fault, optional
        A deliberate failure in worker ``fault.rank`` (< N): at ``fault.step`` 0 before the
        reduce-scatter, 1 before the all-gather (the fault tests).
    start_method : {"fork", "forkserver", "spawn"} or None
        How the workers start (None: the course default).
    timeout : float
        Seconds the parent waits for the workers, > 0.

    Returns
    -------
    dict
        ``"chunks"``: list of ``(lo, hi)``; ``"reduce_scatter"``: each worker's chunk of the
        sum after step 1; ``"all_gather"``: ``(N, n)`` array in the rows' dtype, what each
        holds after step 2; ``"bytes_in"``: ``(N, 2)`` int array, the bytes each worker read
        from the others in step 1 and step 2 (``ShmAllReduce.bytes_in``).

    Examples
    --------
    >>> [run_shm_collectives(np.arange(8, dtype=t).reshape(2, 4), start_method="fork")["bytes_in"].sum().item()
    ...  for t in (np.float32, np.float16)]   # float16: half the bytes of float32
    [32, 16]
    """
    rows = np.asarray(rows) if isinstance(rows, (list, tuple, np.ndarray)) else rows
    if not isinstance(rows, np.ndarray) or rows.dtype.kind not in "iuf":
        raise TypeError(f"rows must be an (N, n) array of real numbers, got {type(rows).__name__}")
    if rows.ndim != 2 or not 1 <= rows.shape[0] <= 64:
        raise ValueError(f"rows must be an (N, n) array with 1 <= N <= 64 workers, got shape {rows.shape}")
    rows = rows if rows.dtype in (np.float16, np.float32, np.float64) else rows.astype(np.float64)
    if fault is not None:
        check_type(fault, "fault", Fault, "a course_lib.parallel.engine.workers.Fault")
        check_int(fault.rank, "fault.rank", 0, rows.shape[0] - 1)
        check_int(fault.step, "fault.step", 0, 1)
    start_method = check_start_method(start_method)
    timeout = check_positive(timeout, "timeout")
    with Launcher(start_method) as launch:
        grads = launch.shared(rows.shape, rows.dtype, rows)
        reduced = launch.shared(rows.shape[1], rows.dtype)
        barrier = launch.barrier(rows.shape[0])
        results = launch.run(_collectives_worker, rows.shape[0], args=(grads.spec, reduced.spec, barrier, fault),
                             timeout=timeout, name="ddl-collectives")
    return {
        "chunks": [r["chunk"] for r in results],
        "reduce_scatter": [r["reduce_scatter"] for r in results],
        "all_gather": np.stack([r["all_gather"] for r in results]),
        "bytes_in": np.array([[r["bytes_in"]["reduce_scatter"], r["bytes_in"]["all_gather"]] for r in results]),
    }


def _collectives_worker(wctx, g_spec, r_spec, barrier, fault: Fault | None = None) -> dict:
    """One worker of :func:`run_shm_collectives` (runs in a child process)."""
    fire = fault.maybe_fire if fault is not None else lambda rank, step: None
    with g_spec.attach() as grads, r_spec.attach() as reduced:
        comm = ShmAllReduce(wctx, grads, reduced, barrier)
        comm.start()
        comm.wait()  # every row is in place (written by the parent here)
        fire(wctx.rank, 0)
        mine = comm.reduce_scatter().copy()
        fire(wctx.rank, 1)
        gathered = comm.all_gather().copy()
        out = {"chunk": (comm.lo, comm.hi), "reduce_scatter": mine, "all_gather": gathered,
               "bytes_in": dict(comm.bytes_in)}
        del comm
    return out
