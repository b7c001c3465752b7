"""The alpha-beta fit of a message-size sweep, chapter 08's exercise on it, and the chapter's
runs beside the reference machines' (issue 37 points 4, 6 and 7).

``course_lib.alpha_beta.fit_alpha_beta`` is the one fit (the reference run imports it); the
exercise accepts any honest fit of the learner's own sweep and names the usual slips; the
chapter shows the shared-memory overlap run and the run over the modelled wire, each against
the model, and prints its interpretations from the measurements.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from course_lib.alpha_beta import fit_alpha_beta, ring_allreduce_time
from course_lib.exercises import collectives as ex

ROOT = Path(__file__).resolve().parent.parent
SIZES = np.geomspace(1e3, 2e7, 8)


def _sweep(devices: int = 2, alpha: float = 2e-5, beta: float = 5e9, noise: float = 0.03) -> dict:
    seconds = ring_allreduce_time(SIZES, devices, beta, alpha) * (1 + noise * np.sin(np.arange(SIZES.size)))
    return {"nbytes": SIZES.tolist(), "seconds": seconds.tolist(), "devices": devices}


# ------------------------------------------------------------------------------------ the fit
def test_the_fit_is_one_function_and_the_reference_run_uses_it():
    from benchmarks import reference, reference_cpu

    assert reference.fit_alpha_beta is fit_alpha_beta
    assert "def fit_alpha_beta" not in Path(reference.__file__).read_text(encoding="utf-8")
    assert "course_lib.alpha_beta import fit_alpha_beta" in Path(reference_cpu.__file__).read_text(encoding="utf-8")


@pytest.mark.parametrize("n", [2, 3, 16])
def test_the_fit_recovers_alpha_and_beta_with_the_ring_factors(n):
    fit = fit_alpha_beta(SIZES, ring_allreduce_time(SIZES, n, 4e9, 7e-6), n)
    assert fit["alpha"] == pytest.approx(7e-6, rel=1e-9) and fit["beta"] == pytest.approx(4e9, rel=1e-9)
    assert fit["intercept"] == pytest.approx(2 * (n - 1) * 7e-6, rel=1e-9)
    assert fit["slope"] == pytest.approx(2 * (n - 1) / n / 4e9, rel=1e-9)
    assert fit["points"] == SIZES.size and fit["relative_rms"] < 1e-9


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    (dict(devices=1), ValueError, "devices"),
    (dict(devices=2.0), TypeError, "devices"),
    (dict(nbytes=[1e3]), ValueError, "length >= 2"),
    (dict(nbytes=[[1e3, 1e4]]), ValueError, "1-D"),
    (dict(seconds=[1e-3, 2e-3, 3e-3]), ValueError, "same length"),
    (dict(nbytes=[0.0, 1e4]), ValueError, "nbytes must be in (0"),
    (dict(seconds=[1e-3, -1e-3]), ValueError, "seconds must be in (0"),
    (dict(seconds=[1e-3, float("nan")]), ValueError, "seconds"),
    (dict(nbytes="abc"), TypeError, "nbytes"),
    (dict(seconds=[1e-3, 1e-4]), ValueError, "seconds must grow with nbytes"),
])
def test_the_fit_names_the_argument_and_its_range(kwargs, error, words):
    args = {"nbytes": [1e3, 1e6], "seconds": [1e-3, 2e-3], "devices": 2} | kwargs
    with pytest.raises(error, match=re.escape(words)):
        fit_alpha_beta(**args)


def test_a_negative_intercept_is_set_to_zero():
    m, t = np.array([1e3, 1e4, 1e5, 1e6]), np.array([1e-6, 1e-5, 2e-4, 1e-2])  # faster than linear in m
    (a, _), *_ = np.linalg.lstsq(np.column_stack([1 / t, m / t]), np.ones(4), rcond=None)
    assert a < 0  # the unclipped line
    fit = fit_alpha_beta(m, t, 2)
    b = np.sum(m / t) / np.sum((m / t) ** 2)  # the line through the origin, relative residuals
    assert fit["alpha"] == 0.0 and fit["intercept"] == 0.0 and fit["slope"] == pytest.approx(b, rel=1e-12)


# ------------------------------------------------------------------------------- exercise 6
def _answer(fit: dict, scale_alpha: float = 1.0, scale_beta: float = 1.0) -> tuple[float, float]:
    return fit["alpha"] * 1e6 * scale_alpha, fit["beta"] / 1e9 * scale_beta


def test_exercise_6_accepts_the_fit_and_honest_others():
    sweep = _sweep()
    fit = fit_alpha_beta(**sweep)
    assert ex.ex6_alpha_beta(_answer(fit), **sweep).correct
    assert ex.ex6_alpha_beta(f"({fit['alpha'] * 1e6:.1f}, {fit['beta'] / 1e9:.2f})", **sweep).correct
    m, t = np.array(sweep["nbytes"]), np.array(sweep["seconds"])
    b, a = np.polyfit(m, t, 1, w=1 / t)  # the solution's weighted fit
    assert ex.ex6_alpha_beta((a / 2 * 1e6, 1 / b / 1e9), **sweep).correct
    slope = (t[-1] - t[0]) / (m[-1] - m[0])  # through the smallest and the largest message
    two_points = ex.ex6_alpha_beta(((t[0] - slope * m[0]) / 2 * 1e6, 1 / slope / 1e9), **sweep)
    assert two_points.correct
    sloppy = ex.ex6_alpha_beta(_answer(fit, 1.3), **sweep)  # far worse than least squares
    assert not sloppy.correct and "Hint" in sloppy.message
    fit4 = fit_alpha_beta(**_sweep(4))
    assert ex.ex6_alpha_beta(_answer(fit4), **_sweep(4)).correct


@pytest.mark.parametrize(("answer", "words", "devices"), [
    (lambda f, n: (f["beta"] / 1e9, f["alpha"] * 1e6), "Swapped", 2),
    (lambda f, n: (f["alpha"], f["beta"] / 1e9), "α is in seconds", 2),
    (lambda f, n: (f["alpha"] * 1e6, f["beta"]), "β is in bytes/s", 2),
    (lambda f, n: (f["alpha"] * 1e6, 8 * f["beta"] / 1e9), "Gbit/s", 2),
    (lambda f, n: (f["intercept"] * 1e6, f["beta"] / 1e9), "2(N-1) = 2 messages", 2),
    (lambda f, n: (f["alpha"] * 1e6, 1 / f["slope"] / 1e9), "β = 2(N-1)/N / b", 4),
    (lambda f, n: (-3.0, f["beta"] / 1e9), "negative latency", 2),
])
def test_exercise_6_names_the_usual_slip(answer, words, devices):
    sweep = _sweep(devices)
    result = ex.ex6_alpha_beta(answer(fit_alpha_beta(**sweep), devices), **sweep)
    assert not result.correct and words in result.message, result.message


def test_exercise_6_names_plain_least_squares():
    sweep = _sweep(noise=0.0, alpha=1e-4)
    m, t = np.array(sweep["nbytes"]), np.array(sweep["seconds"]) * (1 + 0.2 * (np.arange(8) % 2))
    sweep["seconds"] = t.tolist()
    slope, intercept = np.polyfit(m, t, 1)
    assert intercept > 0
    result = ex.ex6_alpha_beta((intercept / 2 * 1e6, 2 * 0.5 / slope / 1e9), **sweep)
    assert not result.correct and "plain least-squares" in result.message, result.message


def test_exercise_6_never_raises_on_a_sweep_it_cannot_use():
    good = _sweep()
    for bad in ({"devices": 1}, {"seconds": [1.0]}, {"nbytes": "x"}, {"seconds": [0.0] * 8}, {"devices": None}):
        result = ex.ex6_alpha_beta((1.0, 1.0), **(good | bad))
        assert not result.correct and "could not check" in result.message
    assert "not answered yet" in ex.ex6_alpha_beta(None, **good).message


def test_exercise_6_givens_are_the_chapters_sweep():
    assert list(ex.EX6_SWEEP["hidden"]) == sorted(ex.EX6_SWEEP["hidden"]) and len(ex.EX6_SWEEP["hidden"]) >= 5
    sizes = [4 * (64 * h + h + 10 * h + 10) for h in ex.EX6_SWEEP["hidden"]]  # MLP((64, h, 10)), float32
    assert sizes[0] < 2_000 and sizes[-1] > 10**7  # from about a kilobyte to tens of megabytes, as the prose says
    assert (f"{sizes[0] / 1e3:.1f} kB", f"{sizes[-1] / 1e6:.0f} MB") == ("1.2 kB", "20 MB")  # as EX6_SWEEP's comment
    assert 1.0 < ex.EX6_TOLERANCE["rms_factor"] < 2.0 and 0 < ex.EX6_TOLERANCE["rtol"] <= 0.1


# ----------------------------------------------------------------- the overlap beside the references
def test_overlap_curves_read_yours_and_a_reference_file():
    from course_lib.plots.overlap import overlap_curves
    from course_lib.plots.reference import beside_references_figure

    mine = {"workers": 2, "rows": [{"buckets": k, "measured_s": 0.03 / k, "model_s": 0.029 / k, "shm_s": 0.025}
                                   for k in (1, 2, 4)]}
    curves = overlap_curves("overlap", mine)
    assert sorted(curves) == ["shared memory, N = 2", "wire, measured, N = 2", "wire, model, N = 2"]
    assert curves["wire, measured, N = 2"][1].tolist() == pytest.approx([30.0, 15.0, 7.5])
    ref = {"runs": [{"workers": 2, "buckets": [1, 2, 4], "measured_step": [0.04, 0.05, 0.045]},
                    {"workers": 4, "buckets": [1, 2, 4], "measured_step": [0.02, 0.02, 0.02]}],
           "wire_runs": [mine | {"rows": [{k: v for k, v in r.items() if k != "shm_s"} for r in mine["rows"]]}]}
    theirs = overlap_curves("overlap", ref)
    assert theirs["shared memory, N = 2"][1].tolist() == pytest.approx([40.0, 50.0, 45.0])
    assert "wire, model, N = 2" in theirs and overlap_curves("overlap", ref, workers=4).keys() == {"shared memory, N = 4"}
    fig = beside_references_figure(curves, {"a 16-core machine": theirs}, title="overlap", xlabel="buckets",
                                   ylabel="ms per step")
    assert fig.axes[0].get_title() == "overlap"
    with pytest.raises(ValueError, match="experiment"):
        overlap_curves("pool", mine)


def test_overlap_curves_of_every_reference_file():
    from course_lib.plots.overlap import overlap_curves
    from course_lib.plots.reference import reference_runs

    runs = reference_runs("overlap", curves=overlap_curves)
    for label, curves in runs.curves.items():
        for name, (x, y) in curves.items():
            assert x.size == y.size and np.all(y[np.isfinite(y)] > 0), (label, name)


# ------------------------------------------------------------------------------- chapter 08
def _chapter():
    path = ROOT / "notebooks" / "08_collectives.ipynb"
    if not path.exists():
        pytest.skip("chapter 08 is not in this checkout")
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _code(cells) -> str:
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _prose(cells) -> str:
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_chapter_08_runs_the_wire_beside_shared_memory_against_the_model():
    cells = _chapter()
    code = _code(cells)
    assert "inspect.getsource(allreduce.WireAllReduce.reduce_bucket)" in code
    assert "measure_overlap(deep" in code and 'reference_runs("overlap", curves=overlap_curves)' in code
    assert 'reference_runs("collectives")' in code and "beside_references_figure(" in code
    # the interpretations are printed from the measurements (and read by tests/test_stored_measurements.py)
    for printed in ("against one all-reduce: {compare(t_over, t_plain)}", "{compare(last['measured_s'], last['sequential_s'])}",
                    "'is within' if worst <= 0.1 else 'is off by up to'", "{compare(last['shm_s'], rows[0]['shm_s'])}"):
        assert printed in code, printed
    prose = _prose(cells)
    assert "global interpreter lock" in prose and "Over a modelled wire" in prose


def test_chapter_08_states_no_outcome_its_run_can_reverse():
    prose = " ".join(_prose(_chapter()).split())
    for retired in ("two cores show mostly the waiting hidden", "what overlap hides there is mostly waiting"):
        assert retired not in prose
    assert "overlap can hide only what is not CPU work, if anything" in prose  # the summary, both outcomes


def test_chapter_08_exercise_6_fits_the_learners_sweep():
    cells = _chapter()
    question = next("".join(c["source"]) for c in cells if "### Exercise 6" in "".join(c["source"]))
    assert "**µs**" in question and "**GB/s**" in question and "`sweep`" in question
    code = _code(cells)
    assert "ex.ex6_alpha_beta(answer, **sweep)" in code and 'for h in g["hidden"]' in code
    assert "alpha_beta.fit_alpha_beta(m, t, n)" in code
