"""The process layer, never shown in a lecture: processes, shared memory, the launcher, the
step monitor, the one description of a run.

=====================  ==========================================================
``workers``            the process group: the one place that starts processes; a
                       worker never outlives its parent
``errors``             what a failed run raises; faults made on purpose
``helpers``            multiprocessing's helper processes, which a kernel must not
                       wait for at its shutdown
``shm``                shared arrays with a guaranteed clean-up
``launch``             the one launcher of the trainers (context, shared arrays,
                       pipes, barriers)
``clock``              the step monitor beside every loop; communicators and stages
                       that time themselves (``@timed``, ``@recorded``)
``job``                the one description of a run (``Job``), checked once
                       (``check_job``); the shared run keywords; the ``Grid``
``gloo``               torch's gloo process group, a free port, whether torch is there
=====================  ==========================================================
"""
