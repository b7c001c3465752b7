"""The entry points the notebooks call: each checks its arguments once (one
:class:`~course_lib.parallel.engine.job.Job`), launches the workers, and collects one result.

=====================  ==========================================================
``reference``          the one-process references: the serial loop, the simulated
                       data-parallel workers, a pipeline's arithmetic
``data``               the data-parallel trainer (shared memory, pipes, gloo, a wire; ZeRO;
                       buckets)
``pipeline``           the pipeline trainer (GPipe, 1F1B, interleaved; recomputation;
                       hybrid data x pipeline with ``data=``)
``tensor``             the tensor-parallel trainer (an MLP's pairs of layers, a
                       transformer's heads)
``context``            the context-parallel trainer (a transformer's sequence split:
                       ring attention, the all-to-all over heads)
``experts``            the expert-parallel trainer (a mixture of experts, all-to-all
                       dispatch and combine)
``collectives``        the shared-memory all-reduce's two steps, run on their own
``speedup``            the pool's speedup and the data-parallel trainer's scaling,
                       measured
``cores``              are the cores free to measure on?
``ceiling``            the serial reference in a worker process; the ceilings (copies
                       that never exchange), the barrier's latency, where a step's time goes
``wire``               overlap over a modelled wire (no CPU spent communicating),
                       measured against the step-time model
``torch_engine``       the data-parallel step under ``torchrun`` (torch.distributed, gloo)
``restarts``           failures measured: a checkpoint's cost, goodput against the
                       checkpoint interval with failures injected, a straggler
=====================  ==========================================================

The names notebooks use most are here too (``from course_lib.parallel.train import
train_data_parallel``); importing this package imports its modules, never torch.
"""

from .collectives import run_shm_collectives
from .context import train_context_parallel
from .cores import CoreCheck, CpuTopology, ThreadGain, check_cores, cpu_topology, gemm_thread_gain
from .data import train_data_parallel
from .experts import train_expert_parallel
from .pipeline import recompute_overhead, train_pipeline
from .reference import train_microbatched, train_serial, train_simulated
from .speedup import GradientWorkload, measure_parallel_speedup, measure_scaling
from .tensor import train_tensor_parallel
from .wire import measure_overlap

__all__ = [
    "CoreCheck",
    "CpuTopology",
    "GradientWorkload",
    "ThreadGain",
    "check_cores",
    "cpu_topology",
    "gemm_thread_gain",
    "measure_overlap",
    "measure_parallel_speedup",
    "measure_scaling",
    "recompute_overhead",
    "run_shm_collectives",
    "train_context_parallel",
    "train_data_parallel",
    "train_expert_parallel",
    "train_microbatched",
    "train_pipeline",
    "train_serial",
    "train_simulated",
    "train_tensor_parallel",
]
