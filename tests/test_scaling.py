"""course_lib.scaling: hand-derived values, bad input, and properties."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from course_lib.scaling import (
    AmdahlFit,
    amdahl,
    amdahl_limit,
    devices_needed,
    efficiency,
    fit_amdahl,
    gustafson,
    karp_flatt,
)

fractions = st.floats(0.0, 1.0, allow_nan=False)
counts = st.floats(1.0, 1e6, allow_nan=False)


# ------------------------------------------------------------------ hand-derived values
@pytest.mark.parametrize(
    ("p", "n", "expected"),
    [
        (0.0, 8, 1.0),  # nothing parallel: no speedup
        (1.0, 8, 8.0),  # all parallel: S = n
        (0.5, 2, 1 / (0.5 + 0.25)),  # 4/3
        (0.9, 10, 1 / (0.1 + 0.09)),  # 5.263...
        (0.95, 20, 1 / (0.05 + 0.0475)),
        (0.9, 1, 1.0),  # one device is the serial run
    ],
)
def test_amdahl_hand_values(p, n, expected):
    assert amdahl(p, n) == pytest.approx(expected, rel=1e-12)


def test_amdahl_infinite_devices_is_the_limit():
    for p in (0.5, 0.9, 0.95, 0.99):
        assert amdahl(p, math.inf) == pytest.approx(1 / (1 - p), rel=1e-12)
    assert amdahl(1.0, math.inf) == math.inf


def test_amdahl_scalar_in_float_out_and_arrays_broadcast():
    assert type(amdahl(0.5, 2)) is float
    out = amdahl(np.array([[0.5], [0.9]]), np.array([1, 2, 4]))
    assert out.shape == (2, 3)
    assert out[1, 2] == pytest.approx(1 / (0.1 + 0.9 / 4))


def test_limits_table_and_the_common_mistake():
    assert amdahl_limit([0.5, 0.9, 0.95, 0.99]) == pytest.approx([2, 10, 20, 100])
    # 10% serial work limits the speedup to 10x, not 9x
    assert amdahl_limit(0.9) == pytest.approx(10)
    assert amdahl_limit(1.0) == math.inf


def test_gustafson_hand_values():
    assert gustafson(0.9, 10) == pytest.approx(9.1)
    assert gustafson(0.0, 100) == 1.0
    assert gustafson(1.0, 64) == 64.0


def test_efficiency_and_karp_flatt_hand_values():
    assert efficiency(6.0, 8) == 0.75
    # S = 4 on 8 devices: e = (1/4 - 1/8) / (1 - 1/8) = 1/7
    assert karp_flatt(4.0, 8) == pytest.approx(1 / 7)
    assert karp_flatt(8.0, 8) == pytest.approx(0.0, abs=1e-15)


def test_devices_needed_hand_values():
    # amdahl(0.9, 8) = 4.706 < 5 <= amdahl(0.9, 9) = 5.0
    assert devices_needed(0.9, 5) == 9
    assert devices_needed(0.9, 1) == 1
    assert devices_needed(0.0, 1) == 1  # nothing parallel, but one device gives speedup 1
    assert devices_needed(1.0, 1) == 1
    assert devices_needed(0.5, math.inf) == math.inf
    assert devices_needed(0.9, 10) == math.inf  # the limit itself is never reached
    assert devices_needed(0.9, 11) == math.inf
    assert devices_needed(0.99, 50) == 99  # 0.99 / (1/50 - 0.01) = 99
    assert np.array_equal(devices_needed([0.9, 0.99], 5), [9, 6])


def test_fit_amdahl_noiseless_and_noisy():
    n = np.array([1, 2, 4, 8, 16, 32])
    fit = fit_amdahl(n, amdahl(0.93, n))
    assert isinstance(fit, AmdahlFit)
    assert fit.p == pytest.approx(0.93, abs=1e-12)
    assert fit.stderr == pytest.approx(0.0, abs=1e-12)
    assert fit.n_points == 6
    rng = np.random.default_rng(0)
    noisy = amdahl(0.9, n) * (1 + 0.02 * rng.standard_normal(n.size))
    fit = fit_amdahl(n, noisy)
    assert abs(fit.p - 0.9) < 3 * fit.stderr + 1e-3
    assert fit.stderr > 0


def test_fit_amdahl_single_informative_point_has_no_stderr():
    fit = fit_amdahl([1, 2], [1.0, 1.6])
    # 1/1.6 - 1 = -p/2  ->  p = 0.75
    assert fit.p == pytest.approx(0.75)
    assert math.isnan(fit.stderr)


def test_fit_amdahl_clips_superlinear_to_one():
    assert fit_amdahl([2, 4], [2.2, 4.5]).p == 1.0


def test_fit_amdahl_default_loss_is_the_run_time():
    n, s = [1, 2, 4, 8], [1.0, 1.7, 3.6, 7.0]
    assert fit_amdahl(n, s) == fit_amdahl(n, s, loss="time")
    assert fit_amdahl(n, s).loss == "time" and fit_amdahl(n, s, loss="speedup").loss == "speedup"
    # the run-time fit in closed form: p = -sum(x y) / sum(x^2), x = 1 - 1/n, y = 1/S - 1
    x, y = 1 - 1 / np.array(n), 1 / np.array(s) - 1
    assert fit_amdahl(n, s).p == pytest.approx(-np.sum(x * y) / np.sum(x * x), rel=1e-12)


def test_fit_amdahl_in_speedup_minimises_the_squared_speedup_errors():
    """The speedup loss's p beats every p of a fine grid on sum (S - S(p))^2."""
    n = np.array([1, 2, 4, 8, 16, 32, 64])
    s = amdahl(0.99, n) * np.array([1, 0.96, 1.0, 0.97, 0.95, 1.02, 1.03])
    fit = fit_amdahl(n, s, loss="speedup")
    sse = lambda p: float(np.sum((s - amdahl(p, n)) ** 2))  # noqa: E731
    grid = np.linspace(0.0, 1.0, 100_001)[:, None]  # Amdahl's law written out, one row per p of the grid
    assert sse(fit.p) <= np.min(np.sum((s - 1 / ((1 - grid) + grid / n)) ** 2, axis=1)) + 1e-12
    assert fit.p != pytest.approx(fit_amdahl(n, s).p, abs=1e-3)  # the losses disagree on noisy data
    assert 0 < fit.stderr < 0.01


def test_fit_amdahl_of_the_lamb_runs_by_loss():
    """Issue 38 H1: the LAMB runs (16 to 1,024 chips) give p = 0.9866 fitted in 1/S and
    0.9947 fitted in S; at n = 64 (1,024 chips, measured S = 49.1) they predict 34.7 and 48.0,
    at n = 16 (measured 12.7) 13.3 and 14.8, and for 4,096 chips 85.7 and 45.5 minutes."""
    from course_lib.datasets import lamb_scaling_table

    t = lamb_scaling_table()
    n = t["devices"] / t["devices"][0]
    s = t["time_minutes"][0] / t["time_minutes"]
    time_fit, speedup_fit = (fit_amdahl(n, s, loss=k) for k in ("time", "speedup"))
    assert round(time_fit.p, 4) == 0.9866 and round(speedup_fit.p, 4) == 0.9947
    assert np.round(amdahl(time_fit.p, [16, 64]), 1).tolist() == [13.3, 34.7]
    assert np.round(amdahl(speedup_fit.p, [16, 64]), 1).tolist() == [14.8, 48.0]
    assert np.round(s[[4, 6]], 1).tolist() == [12.7, 49.1]
    minutes = [t["time_minutes"][0] / amdahl(f.p, 4096 / 16) for f in (time_fit, speedup_fit)]
    assert np.round(minutes, 1).tolist() == [85.7, 45.5]
    # the run-time fit's 1 - p is the mean of the Karp-Flatt values weighted by (1 - 1/n)^2
    weights = (1 - 1 / n[1:]) ** 2
    assert 1 - time_fit.p == pytest.approx(np.average(karp_flatt(s[1:], n[1:]), weights=weights), rel=1e-9)


def test_fit_amdahl_in_speedup_clips_and_handles_one_point():
    assert fit_amdahl([2, 4], [2.2, 4.5], loss="speedup").p == 1.0
    assert fit_amdahl([1, 2, 4], [1.0, 0.9, 0.8], loss="speedup").p == 0.0  # slower with more devices
    one = fit_amdahl([1, 2], [1.0, 1.6], loss="speedup")
    assert one.p == pytest.approx(0.75, abs=1e-9) and math.isnan(one.stderr)


@pytest.mark.parametrize("loss", ["Time", "S", "", None, 1])
def test_fit_amdahl_rejects_an_unknown_loss(loss):
    with pytest.raises(ValueError, match="loss must be one of 'time', 'speedup'"):
        fit_amdahl([1, 2, 4], [1.0, 1.8, 3.0], loss=loss)


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("call", "exc", "words"),
    [
        (lambda: amdahl(1.5, 4), ValueError, "p must be in [0, 1]"),
        (lambda: amdahl(-0.1, 4), ValueError, "p must be in [0, 1]"),
        (lambda: amdahl(0.5, 0.5), ValueError, "n must be in [1, inf]"),
        (lambda: amdahl(float("nan"), 4), ValueError, "p must not be NaN; it must be a number in [0, 1]"),
        (lambda: amdahl(0.5, float("nan")), ValueError, "n must not be NaN; it must be a number in [1, inf]"),
        (lambda: amdahl("0.5", 4), TypeError, "p must be a real number in [0, 1]"),
        (lambda: amdahl(True, 4), TypeError, "p must be a real number"),
        (lambda: amdahl(0.5, None), TypeError, "n must be a real number in [1, inf]"),
        (lambda: amdahl([0.1, 0.2], [1, 2, 3]), ValueError, "p (2,), n (3,)"),
        (lambda: amdahl_limit(2), ValueError, "p must be in [0, 1]"),
        (lambda: gustafson(0.5, math.inf), ValueError, "n must be finite in [1, inf)"),
        (lambda: gustafson(0.5, 0), ValueError, "n must be in [1, inf)"),
        (lambda: efficiency(0, 4), ValueError, "speedup must be in (0, inf)"),
        (lambda: efficiency(math.inf, 4), ValueError, "speedup must be finite in (0, inf)"),
        (lambda: efficiency(2, 0.5), ValueError, "n must be in [1, inf)"),
        (lambda: karp_flatt(2, 1), ValueError, "n must be in (1, inf)"),
        (lambda: karp_flatt(-1, 4), ValueError, "speedup must be in (0, inf)"),
        (lambda: fit_amdahl([1, 1], [1, 1]), ValueError, "at least one processor count > 1"),
        (lambda: fit_amdahl([1, 2, 4], [1, 2]), ValueError, "same length"),
        (lambda: fit_amdahl([[2]], [[2]]), ValueError, "1-D"),
        (lambda: fit_amdahl([2, 4], [1.5, 0]), ValueError, "speedup must be in (0, inf)"),
        (lambda: devices_needed(0.9, 0.5), ValueError, "target_speedup must be in [1, inf]"),
        (lambda: devices_needed(0.9, math.nan), ValueError, "target_speedup must not be NaN; it must be a number in [1, inf]"),
        (lambda: devices_needed(1.2, 2), ValueError, "p must be in [0, 1]"),
    ],
)
def test_bad_input_names_the_parameter(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    assert words in str(info.value)


# ------------------------------------------------------------------------ properties
@given(fractions, counts, st.floats(1.0, 1e3))
def test_amdahl_increasing_in_n(p, n, factor):
    assert amdahl(p, n * factor) >= amdahl(p, n) * (1 - 1e-12)


@given(st.floats(0.0, 0.999), st.floats(0.0, 0.999), counts)
def test_amdahl_increasing_in_p(p1, p2, n):
    lo, hi = sorted((p1, p2))
    assert amdahl(hi, n) >= amdahl(lo, n) * (1 - 1e-12)


@given(fractions, counts)
def test_amdahl_bounded_by_limit_and_by_n(p, n):
    s = amdahl(p, n)
    assert 1 - 1e-12 <= s <= n * (1 + 1e-12)
    assert s <= amdahl_limit(p) * (1 + 1e-12)


@given(fractions, st.floats(1, 1e4), st.floats(1, 1e4))
def test_gustafson_linear_in_n(p, n1, n2):
    # equal increments of n give equal increments of S, with slope p
    assert gustafson(p, n2) - gustafson(p, n1) == pytest.approx(p * (n2 - n1), rel=1e-9, abs=1e-9)


@given(st.floats(0.0, 0.999), st.integers(2, 10_000))
def test_karp_flatt_recovers_serial_fraction(p, n):
    assert karp_flatt(amdahl(p, n), n) == pytest.approx(1 - p, rel=1e-6, abs=1e-9)


@given(st.floats(0.05, 0.999), st.lists(st.integers(2, 4096), min_size=2, max_size=8, unique=True))
@settings(max_examples=50)
def test_fit_amdahl_recovers_p_from_noiseless_data(p, ns):
    fit = fit_amdahl(ns, amdahl(p, ns))
    assert fit.p == pytest.approx(p, abs=1e-9)
    assert fit_amdahl(ns, amdahl(p, ns), loss="speedup").p == pytest.approx(p, abs=1e-7)


@given(st.floats(0.0, 0.999), st.floats(1.0, 500.0))
def test_devices_needed_is_the_smallest_sufficient_count(p, target):
    n = devices_needed(p, target)
    if target >= amdahl_limit(p) * (1 + 1e-9):
        assert n == math.inf
        return
    assume(target < amdahl_limit(p) * (1 - 1e-9))
    assert amdahl(p, n) >= target * (1 - 1e-12)
    if n > 1:
        assert amdahl(p, n - 1) < target


def test_speedup_from_times():
    from course_lib.scaling import speedup

    assert speedup(10.0, 2.5) == 4.0
    assert np.allclose(speedup(8.0, [8.0, 4.0, 1.0]), [1, 2, 8])
    with pytest.raises(ValueError, match="t_parallel must be in"):
        speedup(1.0, 0.0)
    with pytest.raises(ValueError, match="t_serial must be in"):
        speedup(-1.0, 1.0)


@given(fractions, st.floats(1, 1e5))
def test_gustafson_and_amdahl_agree_on_the_scaled_problem(p, n):
    from course_lib.scaling import gustafson_to_amdahl

    pa = gustafson_to_amdahl(p, n)
    assert 0 <= pa <= 1
    assert amdahl(pa, n) == pytest.approx(gustafson(p, n), rel=1e-9)


def test_recurrent_parallel_fraction_counts_the_lstm_gate_products():
    """p = input MACs / all MACs of one LSTM step, counted from the weight shapes."""
    from course_lib.scaling import amdahl_limit, recurrent_parallel_fraction

    d, h = 256, 768
    w_input, w_recurrent = np.zeros((4 * h, d)), np.zeros((4 * h, h))  # the gates' weights
    assert recurrent_parallel_fraction(d, h) == pytest.approx(w_input.size / (w_input.size + w_recurrent.size))
    assert recurrent_parallel_fraction(d, h) == 0.25
    assert amdahl_limit(recurrent_parallel_fraction(1024, 1024)) == pytest.approx(2.0)
    assert recurrent_parallel_fraction(2048, 1024) > recurrent_parallel_fraction(1024, 1024)
    for bad in (dict(input_size=0, hidden_size=4), dict(input_size=4, hidden_size=-1)):
        with pytest.raises(ValueError, match=next(k for k, v in bad.items() if v < 1)):
            recurrent_parallel_fraction(**bad)
    with pytest.raises(TypeError, match="input_size"):
        recurrent_parallel_fraction(1.5, 4)
