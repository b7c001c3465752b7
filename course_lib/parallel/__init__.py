"""Everything that runs on several processes, in three floors.

**The algorithms**, read whole, top to bottom (this folder): what each worker computes and
how it communicates, with no timer, progress report, fault or argument check inside.

=====================  ==========================================================
``partition``          shards, chunks, batches, micro-batches, row sums
``pool``               the first parallel program: one workload over a pool
``allreduce``          every communicator: shared memory (reduce-scatter +
                       all-gather), pipes, gloo, buckets (also over a modelled
                       wire), activations
``data``               the data-parallel step (and with buckets)
``zero``               ZeRO stages 1-3: what each worker keeps, sharded
``pipeline``           a pipeline process's stages and step
``tensor``             the Megatron split of an MLP's pairs of layers
``tensor_transformer`` a transformer's blocks split by heads
``exchange``           a ring and an all-to-all through shared memory
``context``            a transformer's sequence split: ring attention, the
                       all-to-all over heads (context parallelism)
``experts``            a mixture of experts' experts on workers, tokens by
                       all-to-all (expert parallelism)
``checkpoint``         training checkpoints never half-written (a shard per
                       worker, a manifest last) and the resume from the last
                       complete one
=====================  ==========================================================

**The entry points** the notebooks call (``train/``): each checks once, launches the workers
and collects one result; the one-process references; the measured speedups.

**The engine** beneath (``engine/``), never shown in a lecture: the processes (the one place
that starts them), shared memory, the launcher, the step monitor, the job.

The algorithms import nothing from ``train/``; only ``train/`` and ``engine/`` start
processes. The maths these modules run without processes lives above them: the pipeline
schedules (:mod:`course_lib.schedule`), the hybrid planner (:mod:`course_lib.planner`), the
cost of a collective (:mod:`course_lib.alpha_beta`) and of memory (:mod:`course_lib.memory`).
Import the modules themselves (``from course_lib.parallel.data import worker_loop``): this
package imports nothing on its own, so ``import course_lib`` stays fast.
"""
