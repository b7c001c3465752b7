"""The forgiving rules of the exercise checkers, with hand-made answers.

One test (or a few) per rule of ``course_lib.exercises``: the right answer is accepted
at the precisions the notebooks show, text is read as meant ("False", "2x8"), and each
near miss of a general kind gets its own hint - a percent for a fraction, MiB for MB,
the serial part forgotten, a count rounded DOWN, a fraction of a device.
"""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.alpha_beta import communication_crossover, data_parallel_efficiency
from course_lib.datasets import lamb_scaling_table
from course_lib.exercises import (
    check,
    check_count,
    data_parallelism,
    hybrid_parallelism,
    large_batches,
    operator_parallelism,
    pipeline_parallelism,
    scaling_laws,
    serial_to_parallel,
    shown_tolerance,
    summary,
    tensor_parallelism,
)
from course_lib.exercises import memory as memory_ex
from course_lib.parallel.train.speedup import ScalingMeasurement
from course_lib.scaling import amdahl_limit, devices_needed, gustafson, karp_flatt
from course_lib.schedule import bubble_fraction

PERCENT = "give a fraction, not a percent"


def _lower(result) -> str:
    return result.message.lower()


# ------------------------------------------------------- numbers at the precision shown
def _scaling_table(speedup: float) -> str:
    """The table notebook 07 prints for a 2-worker measurement with this speedup."""
    m = ScalingMeasurement(
        workers=np.array([1, 2]), batch_size=1024, per_worker_batch=512, serial_strong=0.04,
        serial_weak=0.02, strong_time=np.array([0.04, 0.04 / speedup]), weak_time=np.array([0.02, 0.021]),
    )
    return m.table()


def test_karp_flatt_accepts_the_printed_value_and_the_one_from_the_printed_speedup():
    # the reported case: S prints as 1.45, e prints as 0.378 (exact 0.37849: just in
    # the rounding range, 0.49e-3 from the printed value)
    speedup = 2 / (1 + 0.37849)
    exact = karp_flatt(speedup, 2)
    table = _scaling_table(speedup)
    assert " 1.45 " in table and " 0.378 " in table  # what the learner reads
    shown = data_parallelism.EX2_SHOWN_DECIMALS
    assert f"{speedup:.{shown['speedup']}f}" == "1.45" and f"{exact:.{shown['karp_flatt']}f}" == "0.378"
    from_shown = karp_flatt(1.45, 2)  # 0.37931
    for answer in (0.378, 0.3785, 0.37849, exact, 0.379, 0.3793, from_shown, round(from_shown, 4)):
        assert data_parallelism.ex2_karp_flatt(answer, speedup=speedup, workers=2).correct, answer
    for decimals in (3, 4, 6):
        for value in (exact, from_shown):
            assert data_parallelism.ex2_karp_flatt(round(value, decimals), speedup=speedup, workers=2).correct
    by_rounded_s = data_parallelism.ex2_karp_flatt(0.3793, speedup=speedup, workers=2)
    assert "from S = 1.45 as printed" in by_rounded_s.message
    for wrong in (0.376, 0.381, 0.39, 0.5):
        assert not data_parallelism.ex2_karp_flatt(wrong, speedup=speedup, workers=2).correct, wrong
    assert "1 - efficiency" in data_parallelism.ex2_karp_flatt(1 - speedup / 2, speedup=speedup, workers=2).message


def test_shown_tolerance_is_half_a_unit_of_the_last_digit():
    assert shown_tolerance(3) == pytest.approx(0.0005)
    assert check(0.378, 0.3785, rtol=0, atol=shown_tolerance(3)).correct
    assert not check(0.378, 0.3786, rtol=0, atol=shown_tolerance(3)).correct
    with pytest.raises(TypeError):
        shown_tolerance(2.5)
    with pytest.raises(ValueError):
        shown_tolerance(-1)


def test_accepted_alternative_is_named_in_the_confirmation():
    result = check(0.38, 0.3785, rtol=0, atol=1e-3, accept={0.3801: "from the rounded inputs"})
    assert result.correct and "from the rounded inputs" in result.message
    assert check(0.3785, 0.3785, accept={0.3801: "x"}).message == "✓ Correct: answer = 0.3785."


def _lamb_efficiency_from_the_s_column() -> float:
    """02 Ex5 from the S column as chapter 02 prints it (2 decimals, relative to 16 chips)."""
    t = lamb_scaling_table()
    chips, minutes = list(t["devices"]), t["time_minutes"]
    i0, i = chips.index(scaling_laws.EX5_LAMB["baseline"]), chips.index(scaling_laws.EX5_LAMB["devices"])
    s0, s = round(minutes[0] / minutes[i0], 2), round(minutes[0] / minutes[i], 2)  # 7.16 and 49.09
    return s / s0 / (chips[i] / chips[i0])


@pytest.mark.parametrize(
    ("exercise", "answers"),
    [
        (scaling_laws.ex4_gustafson, (38.6, "38.6")),  # p = 0.8, N = 48
        (scaling_laws.ex5_lamb_efficiency, (0.857, 0.86, _lamb_efficiency_from_the_s_column())),
        (large_batches.ex1_scaled_lr, (2.4, "2.4")),
        (large_batches.ex3_iteration_efficiency, (0.792, 0.79)),
        (data_parallelism.ex4_ring_allreduce_ms, (8.65, 8.6, 8.7)),
        (pipeline_parallelism.ex_bubble, (0.25, "0.25", "25%")),
        (tensor_parallelism.ex_tensor_bytes, (3.145728, 3.146, 3.15)),
        (summary.ex3_gustafson_to_amdahl, (0.9965, 0.99654)),  # "give four decimals"
        (summary.ex5_weak_scaling_efficiency, (0.935, 0.9345)),
        (summary.ex7_1f1b_bubble, (5 / 29, 0.1724, 0.172)),
    ],
)
def test_right_answers_at_the_precisions_shown_are_accepted(exercise, answers):
    for answer in answers:
        assert exercise(answer).correct, f"{exercise.__name__} rejected {answer!r}"


# ------------------------------------------------------- text read as meant
def test_true_false_yes_no_text_is_understood():
    assert data_parallelism.ex1_mean_of_means(False).correct
    for text in ("False", "false", " False ", "no", "No", "'False'"):
        assert data_parallelism.ex1_mean_of_means(text).correct, text
    for text in ("True", "yes"):
        wrong = data_parallelism.ex1_mean_of_means(text)
        assert not wrong.correct and "is not right" in wrong.message
    assert check("yes", True).correct and not check(1, True).correct  # a number is no yes/no
    assert "Answer True or False" in data_parallelism.ex1_mean_of_means("perhaps").message


def test_pairs_and_grids_typed_as_text_are_understood():
    ths = hybrid_parallelism
    best = ths._best_split()
    d, p, n = best.data, best.pipeline, ths.BEST_SPLIT["devices"]
    assert (d, p) == (2, 16) and d * p == n
    for text in (f"{d}x{p}", f"{d}×{p}", f"{d} x {p}", f"{d}X{p}", f"({d}, {p})", f"[{d}, {p}]",
                 f"{d},{p}", f"{d} by {p}"):
        assert ths.ex_best_split(text).correct, text
    assert ths.ex_best_split((d, p)).correct and ths.ex_best_split([d, p]).correct
    assert "Pure data parallelism" in ths.ex_best_split(f"{n}x1").message
    assert "only 25 layers" in ths.ex_best_split(f"1x{n}").message  # 32 stages > 25 layers
    assert not ths.ex_best_split(f"{p}x{d}").correct
    assert operator_parallelism.ex1_gemm_sizes("(12544, 576, 128)").correct
    assert operator_parallelism.ex1_gemm_sizes("12544x576x128").correct
    assert "could not" not in ths.ex_best_split(f"{d}x{p}x1").message  # three numbers: just wrong


def test_numbers_typed_as_text_are_understood():
    assert check("0.2", 0.2).correct and check("20%", 0.2).correct
    assert check("1,024", 1024).correct and check_count("29", 29).correct


# ------------------------------------------------------- the percent rule
@pytest.mark.parametrize(
    ("result", "fraction"),
    [
        (lambda: check(20, 0.2, name="share"), "0.2"),
        (lambda: check(53.27, 0.5327, name="efficiency"), "0.5327"),
        (lambda: pipeline_parallelism.ex_bubble(25), "0.25"),
        (lambda: scaling_laws.ex5_lamb_efficiency(85.67), "0.8567"),
        (lambda: summary.ex7_1f1b_bubble(17.24), "0.1724"),
        (lambda: summary.ex3_gustafson_to_amdahl(99.65), "0.9965"),
    ],
)
def test_a_percent_for_a_fraction_gets_its_own_hint(result, fraction):
    r = result()
    assert not r.correct and PERCENT in _lower(r) and f"is {fraction}" in r.message


def test_percent_rule_only_where_a_fraction_is_asked():
    assert PERCENT not in _lower(check(2000, 20))  # 20 is no fraction
    assert PERCENT not in _lower(check(30, 0.2))


# ------------------------------------------------------- MB vs MiB
def test_mib_for_mb_and_the_other_way_round_get_a_word_on_units():
    right = tensor_parallelism.TENSOR_BYTES["batch_size"] * 4 * 6144 / 1e6  # 3.145728 MB = 3 MiB
    mib = tensor_parallelism.ex_tensor_bytes(right * 1e6 / 2**20)
    assert not mib.correct and "That is MiB; the question asks MB (10^6 bytes)" in mib.message
    gib = memory_ex.ex_zero_gb(31.6875e9 / 2**30)
    assert not gib.correct and "That is GiB; the question asks GB (10^9 bytes)" in gib.message
    mb = check(1.572864, 1.5, unit="MiB")
    assert not mb.correct and "That is MB; the question asks MiB (2^20 bytes)" in mb.message
    kib = check(1000 / 1024, 1.0, unit="kB", rtol=1e-3)
    assert "That is KiB; the question asks kB (10^3 bytes)" in kib.message
    assert "MiB" not in check(1.5, 1.572864, unit="ms").message  # not a byte unit: no word


# ------------------------------------------------------- wrong answers no longer accepted
def test_scaled_speedup_without_the_serial_part_gets_its_own_hint():
    p, n = scaling_laws.EX4_GUSTAFSON["p"], scaling_laws.EX4_GUSTAFSON["devices"]
    assert scaling_laws.ex4_gustafson(gustafson(p, n)).correct
    forgot = scaling_laws.ex4_gustafson(p * n)  # 38.4 for 38.6 (57.6 for 57.7 was accepted by a 1% tolerance)
    assert not forgot.correct and "serial part forgotten" in _lower(forgot)


def test_ring_time_without_the_latency_gets_its_own_hint():
    no_latency = data_parallelism.ex4_ring_allreduce_ms(8.5)  # 2 x 15/16 x 0.68 GB / 150 GB/s
    assert not no_latency.correct and "latency left out" in _lower(no_latency)
    q = summary.Q5
    without = data_parallel_efficiency(q["compute_s"], q["devices"], q["nbytes"], q["bandwidth"], 0.0,
                                       scaling="weak")
    assert "latency left out" in _lower(summary.ex5_weak_scaling_efficiency(round(without, 4)))


# ------------------------------------------------------- counts: one rule everywhere
def _ps_crossover():
    nbytes = data_parallelism.RUNNING_EXAMPLE.n_params * 4
    return communication_crossover(50e-3, nbytes, 10e9 / 8, 10e-6, algorithm="ps")


def _micro_batches():
    n_p, target = pipeline_parallelism.MICRO_BATCHES["stages"], pipeline_parallelism.MICRO_BATCHES["target"]
    return next(m for m in range(1, 1000) if bubble_fraction(n_p, m) <= target + 1e-12)


#: Every count exercise whose answer is the fewest that meet a condition: (checker,
#: expected computed here independently of the checker, what is counted).
ROUND_UP_COUNTS = [
    pytest.param(scaling_laws.ex3_devices,
                 lambda: devices_needed(scaling_laws.EX3_DEVICES["p"], scaling_laws.EX3_DEVICES["target"]),
                 "device", id="02-ex3"),
    pytest.param(data_parallelism.ex3_ps_crossover, _ps_crossover, "device", id="07-ex3"),
    pytest.param(pipeline_parallelism.ex_micro_batches, _micro_batches, "micro-batch", id="09-ex2"),
    pytest.param(summary.ex2_devices_needed, lambda: devices_needed(0.97, 20), "device", id="11-ex2"),
]


@pytest.mark.parametrize(("exercise", "expected", "noun"), ROUND_UP_COUNTS)
def test_counts_are_whole_and_rounded_up(exercise, expected, noun):
    n = expected()
    for right in (n, float(n), str(n), np.int64(n)):
        assert exercise(right).correct, right
    for fraction in (n - 0.5, n - 0.6, n + 0.4, n - 1 + 1e-3):  # 06 Ex2 accepted 48.5, 05 Ex4 (now 07 Ex3) 4.4
        result = exercise(fraction)
        assert not result.correct, fraction
        assert (f"a {noun} count is a whole number; round up (a fraction of a {noun} does not exist)"
                in _lower(result))
    short = exercise(n - 1)
    assert not short.correct and f"one {noun} short" in _lower(short)
    assert "whole number" not in _lower(exercise(n + 1))


def test_the_reported_fractional_answers_are_rejected():
    assert scaling_laws.ex3_devices(28).message != scaling_laws.ex3_devices(28.5).message
    assert not data_parallelism.ex3_ps_crossover(4.4).correct
    assert not pipeline_parallelism.ex_micro_batches(48.5).correct and not pipeline_parallelism.ex_micro_batches(62.9).correct


@pytest.mark.parametrize(
    ("exercise", "right", "fraction", "noun"),
    [(operator_parallelism.ex3_critical_path, 18, 17.5, "step")],
)
def test_counts_that_are_not_rounded_up_are_whole_too(exercise, right, fraction, noun):
    assert exercise(right).correct and exercise(float(right)).correct
    result = exercise(fraction)
    assert not result.correct and f"a {noun} count is a whole number (a fraction" in _lower(result)
    assert "round up" not in _lower(result)
    assert "short" not in _lower(exercise(right - 1))  # no "one step short" where nothing is solved


def test_check_count_keeps_the_callers_known_mistakes():
    result = check_count(70, 63, noun="micro-batch", mistakes={70: "That is M + N_p - 1."})
    assert "M + N_p - 1" in result.message
    assert "M + N_p - 1" in pipeline_parallelism.ex_micro_batches(70).message
    assert "ring all-reduce" in data_parallelism.ex3_ps_crossover(
        communication_crossover(50e-3, data_parallelism.RUNNING_EXAMPLE.n_params * 4, 10e9 / 8, 10e-6,
                                algorithm="ring")).message


# ------------------------------------------------------- targeted hints for the new givens
def test_each_exercise_names_the_number_the_chapter_printed_for_other_givens():
    """An answer copied from the chapter's printout (the case the exercise used to ask) is
    told what it is, not just "not right"."""
    assert "section 2's 3-layer cnn" in _lower(operator_parallelism.ex3_critical_path(8))
    assert "16-chip run" in scaling_laws.ex5_lamb_efficiency(0.767).message
    assert "16-chip run" in large_batches.ex3_iteration_efficiency(0.766).message
    assert "float32" in data_parallelism.ex4_ring_allreduce_ms(17.15).message
    assert "law of the lamb table's job" in _lower(large_batches.ex4_which_law("Amdahl"))
    assert large_batches.ex4_which_law("Gustafson").correct and large_batches.ex4_which_law(" gustafson ").correct
    # ResNet-101 (7.801 GMACs per image, not in the chapter's table), 64 images
    assert serial_to_parallel.EX1_BATCH == {"model": "ResNet-101", "images": 64}
    assert serial_to_parallel.ex1_batch_gflops(64 * 2 * 7.801).correct
    assert "one image" in serial_to_parallel.ex1_batch_gflops(2 * 7.801).message
    assert "multiply-accumulate" in serial_to_parallel.ex1_batch_gflops(64 * 7.801).message
    assert not serial_to_parallel.ex1_batch_gflops(32 * 8.178).correct  # the old ResNet-50 answer


def test_frequency_growth_names_a_percentage_read_as_a_fraction():
    """Issue 44 item 8: a growth typed as a percent ('579%') is read as the fraction 5.79;
    the checker says so instead of the generic hint (2000-2004 over 1995-1999: 3651.74 MHz
    / 537.612 MHz = 6.79)."""
    ratio = 3651.74 / 537.612
    ex2 = serial_to_parallel.ex2_frequency_growth
    assert serial_to_parallel.EX2_PERIODS == {"earlier": (1995, 2000), "later": (2000, 2005)}
    assert ex2(ratio).correct and ex2(f"{100 * ratio:.0f}%").correct
    for slip in (f"{100 * (ratio - 1):.0f}%", f" {100 * (ratio - 1):.0f} % "):
        result = ex2(slip)
        assert not result.correct and "A percentage was read as a fraction" in result.message, slip
        assert "Hint:" not in result.message and result.message.count("✗") == 1
    assert "growth, ratio - 1" in ex2(ratio - 1).message  # typed as a number: no percent sign to blame
    assert "growth in percent" in ex2(100 * (ratio - 1)).message
    assert "Upside down" in ex2(1 / ratio).message


def test_the_limit_hint_states_the_serial_share_of_the_givens():
    serial = scaling_laws.EX1_LIMIT["serial"]
    result = scaling_laws.ex1_limit(amdahl_limit(1 - serial) - 1)
    assert not result.correct and f"serial {serial:.0%}" in result.message and f"1/{serial:g}" in result.message


class _Measured:
    """A chapter-01 measurement: S = 1.8717 with 2 processes (prints as 1.87 and η 0.94)."""

    processes = np.array([1, 2])
    speedup = np.array([0.99, 1.8717])
    efficiency = speedup / processes


def test_measured_overhead_accepts_the_printed_numbers_and_names_the_mistakes():
    m = _Measured()
    exact = 2 - 1.8717  # N - S = 0.1283
    for answer in (exact, 0.128, 0.13, 2 - 1.87, 2 * (1 - 0.94)):  # exact, from S or η as printed
        assert serial_to_parallel.ex5_measured_efficiency(answer, m).correct, answer
    assert "as printed" in serial_to_parallel.ex5_measured_efficiency(2 * (1 - 0.94), m).message
    assert "efficiency η itself" in serial_to_parallel.ex5_measured_efficiency(0.936, m).message
    assert "speedup s" in _lower(serial_to_parallel.ex5_measured_efficiency(1.8717, m))
    assert "share 1 - η" in serial_to_parallel.ex5_measured_efficiency(1 - 0.93585, m).message
    assert not serial_to_parallel.ex5_measured_efficiency(0.2, m).correct


# ------------------------------------------------------------------ issue 25: the reported faults
@pytest.mark.parametrize("answer", ["Amdahl", "Amdahl's law", "amdahl law", "Amdahl’s Law", "AMDAHL"])
def test_which_law_takes_the_name_in_any_usual_form(answer):
    from course_lib.exercises.scaling_laws import ex6_which_law

    assert ex6_which_law(answer).correct
    assert not ex6_which_law("Gustafson's law").correct
    assert "law of one step" in ex6_which_law("Gustafson's law").message


def test_karp_flatt_of_the_pipes_accepts_e_from_the_printed_step_times_and_at_2_decimals():
    from course_lib.exercises.data_parallelism import ex2_karp_flatt
    from course_lib.scaling import karp_flatt

    serial, pipes = 0.0201, 0.017249  # printed as 20.1 ms and 17.2 ms
    speedup = serial / pipes
    exact = karp_flatt(speedup, 2)
    by_hand = karp_flatt(20.1 / 17.2, 2)  # from the printed times
    assert round(exact, 4) == 0.7163 and round(by_hand, 4) == 0.7114
    kw = dict(speedup=speedup, workers=2, step_seconds=(serial, pipes))
    for answer in (exact, 0.7165, round(by_hand, 4), 0.72, "72%", "0,72"):
        assert ex2_karp_flatt(answer, **kw).correct, answer
    for wrong in (0.69, 0.74, 0.5, 1 - speedup / 2):  # 0.70 is within the printed times' rounding
        assert not ex2_karp_flatt(wrong, **kw).correct, wrong
    assert not ex2_karp_flatt(0.73, **kw).correct  # a 2-decimal answer is judged at 2 decimals, no more


def test_ring_allreduce_with_another_parameter_count_gets_a_word_on_the_count_not_on_latency():
    from course_lib import alpha_beta
    from course_lib.exercises.data_parallelism import EX4_SETUP, ex4_ring_allreduce_ms

    s = EX4_SETUP

    def ring_ms(params, latency=s["latency"]):
        return 1e3 * alpha_beta.ring_allreduce_time(2 * params, s["devices"], s["bandwidth"], latency)

    assert s["params"] == 340e6
    assert ex4_ring_allreduce_ms(ring_ms(340e6)).correct and ex4_ring_allreduce_ms("8.65 ms").correct
    with_335 = ex4_ring_allreduce_ms(ring_ms(335e6))
    assert not with_335.correct and "335 M parameters" in with_335.message and "Latency" not in with_335.message
    no_latency = ex4_ring_allreduce_ms(ring_ms(340e6, latency=0.0))
    assert "Latency left out" in no_latency.message


def test_zero_stage_2_over_31_gpus_is_not_the_answer_for_32():
    from course_lib.exercises.memory import ZERO, ex_zero_gb
    from course_lib.memory import model_state_bytes

    g = ZERO
    right = model_state_bytes(g["n_params"], g["devices"], g["zero_stage"]).total / 1e9
    off_by_one = model_state_bytes(g["n_params"], g["devices"] - 1, g["zero_stage"]).total / 1e9
    assert ex_zero_gb(right).correct and ex_zero_gb(round(right, 1)).correct
    result = ex_zero_gb(off_by_one)
    assert not result.correct and "31 GPUs" in result.message


@pytest.mark.parametrize("answer", [(2, 16), (2, 16, 1), "2x16x1", "(2, 16, 1)", "2 x 16"])
def test_best_grid_takes_the_tensor_degree_1_and_uses_the_course_notation(answer):
    from course_lib.exercises.hybrid_parallelism import _best_split, ex_best_split

    best = _best_split()
    assert (best.data, best.pipeline) == (2, 16)
    result = ex_best_split(answer)
    assert result.correct and "(N_d, N_p)" in result.message and "(D, P)" not in result.message
    assert "N_t = 1" in ex_best_split((2, 16, 2)).message


@pytest.mark.parametrize(("name", "answer"), [
    ("ex_zero_gb", "{mb} MB"), ("ex_zero_gb", "{tb} TB"), ("ex4_ring_allreduce_ms", "{v} ms"),
    ("ex4_ring_allreduce_ms", "{s} s"), ("ex_zero_gb", "{v} GB"), ("ex_zero_gb", "{v}GB"),
    ("ex_zero_gb", "{comma}"), ("ex4_ring_allreduce_ms", "{comma} ms"),
])
def test_answers_with_a_unit_or_a_decimal_comma_are_read_as_meant(name, answer):
    from course_lib.exercises import data_parallelism
    from course_lib.exercises import memory as memory_ex
    from course_lib.memory import model_state_bytes

    g = memory_ex.ZERO
    right = {  # in the checker's unit: GB, MB, ms
        "ex_zero_gb": model_state_bytes(g["n_params"], g["devices"], g["zero_stage"]).total / 1e9,
        "ex4_ring_allreduce_ms": data_parallelism._ex4_expected(),
    }[name]
    text = answer.format(v=f"{right:.6g}", mb=f"{right * 1e3:.6g}", tb=f"{right / 1e3:.6g}", s=f"{right / 1e3:.6g}",
                         comma=f"{right:.6g}".replace(".", ","))
    module = memory_ex if name == "ex_zero_gb" else data_parallelism
    result = getattr(module, name)(text)
    assert result.correct, (text, result.message)
    assert "leave out the quotes" not in getattr(module, name)(text + " per step").message


@pytest.mark.parametrize(("answer", "words"), [
    ("5.7 MB", "is a size in bytes"), ("a lot", "does not start with a number"), ("3 parsecs", "unknown unit"),
])
def test_text_that_is_no_number_gets_the_reason_not_leave_out_the_quotes(answer, words):
    from course_lib.exercises.data_parallelism import ex4_ring_allreduce_ms

    message = ex4_ring_allreduce_ms(answer).message
    assert words in message and "leave out the quotes" not in message


@pytest.mark.parametrize(("answer", "expected", "unit", "words"), [
    (8.65e-3, 8.65, "ms", "right value in s"), (5.7e6, 5.7, "MB", "right value in B"),
    (5.7e-3, 5.7, "MB", "right value in GB"), (5.436, 5.7, "MB", "That is MiB"), (72, 0.72, "", "not a percent"),
])
def test_a_right_value_in_another_unit_gets_a_word_on_units(answer, expected, unit, words):
    from course_lib.exercises import check

    result = check(answer, expected, unit=unit)
    assert not result.correct and words in result.message


def test_factors_and_percents_typed_with_their_sign():
    from course_lib.exercises import check

    assert check("33x", 33.0).correct and check("4x", 4).correct and check("4 ×", 4).correct
    assert check("72%", 0.72).correct and check("3,75", 3.75).correct and check("1,024", 1024).correct
