"""Everything that runs on several processes, split by job.

The maths these modules run is below them, without processes: the split of the batch
(:mod:`course_lib.parallel.partition` is pure too), the pipeline schedules
(:mod:`course_lib.schedule`), the hybrid planner (:mod:`course_lib.planner`), the cost of
a collective (:mod:`course_lib.comm`) and of memory (:mod:`course_lib.memory`).

=====================  ==========================================================
``workers``            process group, worker context, errors, faults: the one place
                       that starts processes; a worker never outlives its parent
``shm``                shared arrays with a guaranteed clean-up
``launch``             the one launcher of the trainers (context, shared arrays,
                       pipes, barriers) and the step clock beside the step loops
``job``                the one check of a trainer's arguments, the job a worker gets
``partition``          shards, micro-batches, chunks, batch schedules, row sums
``allreduce``          shared-memory, pipe and torch-gloo all-reduce, one interface
``speedup``            chapter 01's first experiment; strong and weak scaling (07)
``data``               the data-parallel trainer (its references: course_lib.reference)
``zero``               ZeRO stage 1: the optimizer state sharded over the workers
``tensor``             tensor parallelism: the Megatron split of pairs of layers
``tensor_transformer`` tensor parallelism of a transformer: blocks split by heads
``pipeline``           layer-wise stages as processes (GPipe, 1F1B)
``hybrid``             data x pipeline: replicas of a pipeline (train_hybrid)
``torch_engine``       the data-parallel step on torch.distributed (gloo), optional
=====================  ==========================================================

Import the modules themselves (``from course_lib.parallel.workers import ProcessGroup``):
this package imports nothing on its own, so ``import course_lib`` stays fast.
"""
