"""Exercises of the overlap section (chapter "Collectives and synchronisation").

Expected values come from :func:`course_lib.overlap.overlapped_step_time` - never typed
in. The givens are module constants, so the notebook can print them.
"""

from __future__ import annotations

from ..overlap import overlapped_step_time
from . import Result, check

__all__ = ["EX1_STEP", "ex1_overlapped_step_ms"]

#: Exercise 1: one data-parallel step in 4 buckets, numbered in the order the backward pass
#: finishes them (the last layers first), in milliseconds. The first layer is the widest: its
#: bucket's backward is the longest, and the middle buckets' all-reduces take longer than
#: their backward.
EX1_STEP = {"forward_ms": 4.0, "backward_ms": (3.0, 6.0, 6.0, 9.0), "allreduce_ms": (2.0, 8.0, 8.0, 4.0),
            "update_ms": 2.0}


def _ex1_times() -> dict:
    s = EX1_STEP
    return overlapped_step_time(s["forward_ms"], s["backward_ms"], s["allreduce_ms"], update=s["update_ms"])


def ex1_overlapped_step_ms(answer) -> Result:
    """Step time in ms of :data:`EX1_STEP` when each bucket's all-reduce starts as soon as its
    backward is done and the link is free (one all-reduce at a time), the update after the
    last one."""
    s, t = EX1_STEP, _ex1_times()
    compute = s["forward_ms"] + sum(s["backward_ms"]) + s["update_ms"]
    mistakes = {
        t["sequential"]: "That is the step WITHOUT overlap: every all-reduce after the whole backward.",
        compute: "That is a perfect overlap, all communication hidden; but an all-reduce can only "
                 "start when its bucket is ready AND the previous all-reduce has finished.",
        compute + s["allreduce_ms"][-1]: "Only the last bucket after the backward? The link is still busy "
                                         "with an earlier bucket when the backward ends: follow "
                                         "done = max(ready, previous done) + all-reduce, bucket by bucket.",
        t["overlapped"] - s["update_ms"]: "The all-reduces are right; the update comes after the last one.",
    }
    return check(
        answer,
        t["overlapped"],
        name="step time with overlap",
        unit="ms",
        hint="bucket ν is ready at forward + the backward of buckets 1..ν; its all-reduce ends at "
             "max(ready, the previous all-reduce's end) + its own time; the step ends after the "
             "last all-reduce and the update.",
        mistakes=mistakes,
    )
