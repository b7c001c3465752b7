"""The graders of the scratch edition: the course's checks of the functions a learner writes.

In the scratch edition (``python -m course_lib scratch``, ``make scratch``) the bodies of the
teaching core (:data:`TEACHING_CORE`: the all-reduce, the data-parallel step, ZeRO, the
pipeline's order and stage, the tensor split, im2col ...) are stubs, and the learner writes
them. ``python -m course_lib check [NAME]`` (``make check NAME=...`` in the edition) runs, per
function, its check against the course's references (bit for bit where the course is) and
says what is wrong in words a learner can act on: "reduce_scatter: worker 1's chunk [48, 96)
is the mean of the rows, not the sum: did you divide by N?".

How a check runs the learner's code
-----------------------------------
Functions that run on several processes run on them, through the course's engine, with a
short timeout (:data:`course_lib.grading.core.GRADER_TIMEOUT`): a function that hangs ends
with ``WorkerTimeout`` naming the hung worker within seconds. A function that raises shows
the learner's own traceback (the frames of the files they write in), not the engine's. A
stub's ``NotImplementedError`` reads "not written yet", with the chapter and section to read.

Adding a function
-----------------
One line in :data:`TEACHING_CORE` (where the function is and which grading module checks
it), and its check in that module's ``CHECKS`` (with its ``HINTS``): the scratch edition stubs
it, its README lists it, and ``make check`` grades it.

Examples
--------
>>> [f.qualname for f in TEACHING_CORE][:3]
['im2col', 'col2im', 'worker_loop']
>>> select(["allreduce"])[0].qualname      # a function's name, or its module's
'ShmAllReduce.reduce_scatter'
"""

from __future__ import annotations

from .core import (
    GRADER_TIMEOUT,
    NOT_WRITTEN,
    TEACHING_CORE,
    Function,
    Mistake,
    Outcome,
    grade,
    grade_all,
    main,
    not_written_message,
    select,
)

__all__ = [
    "GRADER_TIMEOUT",
    "NOT_WRITTEN",
    "TEACHING_CORE",
    "Function",
    "Mistake",
    "Outcome",
    "grade",
    "grade_all",
    "main",
    "not_written_message",
    "select",
]
