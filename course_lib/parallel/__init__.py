"""Everything that runs on several processes, split by job.

=====================  ==========================================================
``workers``            process group, worker context, errors, faults: the one place
                       that starts processes; a worker never outlives its parent
``shm``                shared arrays with a guaranteed clean-up
=====================  ==========================================================

Import the modules themselves (``from course_lib.parallel.workers import ProcessGroup``):
this package imports nothing on its own, so ``import course_lib`` stays fast.
"""
