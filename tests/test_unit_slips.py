"""One table of unit slips for every checker (course_lib.exercises.UNIT_SLIPS).

A right answer in the wrong form gets its slip named, whichever exercise it answers: a
fraction given as a percent, a percentage read as a fraction (typed with its sign where the
question asks a ratio or the number itself), MiB for MB, a bare k/M/G where a size is asked,
the right value in another unit of the kind. A count may carry the word it counts. Each
message is one message (never two run together).
"""

from __future__ import annotations

import pytest

from course_lib.exercises import UNIT_SLIPS, check
from course_lib.typed_numbers import read_quantity

CASES = [
    # (answer, expected, unit, the slip's name in UNIT_SLIPS, a phrase of its hint)
    (27, 0.27, "", "a fraction given as a percent", "Give a fraction, not a percent"),
    ("27%", 1.27, "", "a percentage read as a fraction", "A percentage was read as a fraction"),
    ("27%", 27.0, "", "a percent sign on a plain number", "The percent sign made it a fraction"),
    (2.346, 2.46, "MB", "MiB for MB (and the other binary units)", "That is MiB; the question asks MB"),
    ("2460k", 2.46, "MB", "a bare k, M or G where a size is asked", "not a size - the right size"),
    (2460, 2.46, "MB", "the right value in another unit of the kind", "right value in kB; the question asks MB"),
]


@pytest.mark.parametrize(("answer", "expected", "unit", "slip", "phrase"), CASES, ids=[c[3] for c in CASES])
def test_every_slip_of_the_table_is_named(answer, expected, unit, slip, phrase):
    assert slip in dict(UNIT_SLIPS)
    result = check(answer, expected, name="x", unit=unit, hint="the generic hint")
    assert not result.correct
    assert phrase in result.message and "the generic hint" not in result.message
    assert result.message.count("✗") == 1 and "could not compare" not in result.message


def test_the_table_covers_every_rule():
    assert {c[3] for c in CASES} == set(dict(UNIT_SLIPS))


def test_a_count_may_carry_the_word_it_counts_and_gets_one_message():
    assert check("4272 samples", 4272, name="crossover batch B").correct
    wrong = check("4272 samples", 4200, name="crossover batch B")
    assert not wrong.correct and wrong.message.count("✗") == 1 and "could not compare" not in wrong.message
    assert read_quantity("16 micro-batches") == 16.0 and read_quantity("8 GPUs", "devices") == 8.0
    with pytest.raises(ValueError, match="size in bytes"):
        read_quantity("5 MB", "devices")  # a unit of another kind is still refused


def test_text_that_is_no_number_is_told_once():
    result = check("about four", 4.0, name="x")
    assert result.message.count("✗") == 1 and "could not compare" not in result.message
    assert "Could not read" in result.message
