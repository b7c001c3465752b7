"""course_lib.live.widgets: live figures redraw on slider changes and carry a static PNG."""

import numpy as np
import pytest

from course_lib.live.widgets import WIDGET_VIEW_MIME, Choice, Slider, live_figure
from course_lib.plots.pipeline import schedule_figure
from course_lib.plots.scaling import amdahl_figure, laws_figure

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _sliders():
    return [
        Slider("p", "p", 0, 1, 0.01, 0.9, help="parallel fraction"),
        Slider("n", "N", 0, 10, 1, 16, unit="devices", kind="log2", help="device count"),
    ]


@pytest.fixture(scope="module")
def untouched():
    """A live figure of laws_figure that no test moves: the read-only tests of its initial
    state share it (one initial render instead of one each)."""
    return live_figure(laws_figure, _sliders())


def test_bundle_has_widget_view_png_and_text(untouched):
    fig = untouched
    bundle, _metadata = fig._repr_mimebundle_()
    assert bundle["image/png"].startswith(PNG_MAGIC)
    assert bundle[WIDGET_VIEW_MIME]["model_id"] == fig.widget.model_id
    assert bundle["text/plain"] == "<live figure: laws_figure(p=0.9, n=16)>"


def test_slider_change_redraws_and_keeps_initial_fallback():
    fig = live_figure(laws_figure, _sliders())
    first = fig.image.value
    fig.controls["p"].value = 0.5
    assert fig.image.value != first
    assert fig.initial_png == first  # the static fallback stays the initial state
    assert fig.values() == {"p": 0.5, "n": 16}


def test_log2_slider_gives_integers_and_units_show_in_description():
    fig = live_figure(laws_figure, _sliders())
    fig.controls["n"].value = 64
    assert fig.values()["n"] == 64 and isinstance(fig.values()["n"], int)
    assert fig.controls["n"].description == "N [devices]"
    assert fig.controls["p"].tooltip == "parallel fraction"


def test_fixed_arguments_are_passed_through():
    fig = live_figure(
        amdahl_figure,
        [Slider("p", "p", 0, 1, 0.01, 0.9), Slider("s", "s", 1, 64, 1, 8, kind="float")],
        n=8,
        n_max=64,
    )
    assert fig.fixed == {"n": 8, "n_max": 64}


def test_plot_error_is_shown_not_raised():
    def plot(p):
        if p > 0.5:
            raise ValueError("p too large for this demo")
        return laws_figure(p, 4)

    fig = live_figure(plot, [Slider("p", "p", 0, 1, 0.1, 0.2)])
    before = fig.image.value
    fig.controls["p"].value = 0.9
    assert "p too large" in fig.message.value
    assert fig.image.value == before


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(min=1, max=0), "min must be < max"),
        (dict(value=5), "value must be in [0, 1]"),
        (dict(kind="cubic"), "kind must be"),
    ],
)
def test_bad_slider_specs(kwargs, words):
    spec = dict(name="p", label="p", min=0, max=1, step=0.1, value=0.5) | kwargs
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        Slider(**spec)


def test_duplicate_names_and_non_callable_plot_rejected():
    with pytest.raises(ValueError, match="unique"):
        live_figure(laws_figure, [Slider("p", "p", 0, 1, 0.1, 0.5)] * 2)
    with pytest.raises(TypeError, match="plot must be callable"):
        live_figure("laws", [Slider("p", "p", 0, 1, 0.1, 0.5)])


def test_choice_gives_a_dropdown_that_drives_the_plot():
    from course_lib.live.widgets import Choice

    seen = []

    def plot(p, law):
        seen.append(law)
        return laws_figure(p, 8)

    fig = live_figure(plot, [Slider("p", "p", 0, 1, 0.1, 0.5), Choice("law", "law", ["Amdahl", "Gustafson"], "Amdahl")])
    fig.controls["law"].value = "Gustafson"
    assert seen == ["Amdahl", "Gustafson"] and fig.values()["law"] == "Gustafson"
    with pytest.raises(ValueError, match="value must be one of"):
        Choice("law", "law", ["a", "b"], "c")
    with pytest.raises(ValueError, match="options must not be empty"):
        Choice("law", "law", [], None)


def test_glossary_search_filters_live_and_shows_the_whole_table_statically():
    from course_lib.datasets import load_glossary
    from course_lib.live.glossary import GlossarySearch
    from course_lib.live.widgets import WIDGET_VIEW_MIME

    entries = load_glossary()
    g = GlossarySearch(entries)
    bundle = g._repr_mimebundle_()
    assert WIDGET_VIEW_MIME in bundle and bundle["text/plain"] == f"<glossary: {len(entries)} terms>"
    assert bundle["text/html"].startswith(f"<p>{len(entries)} of {len(entries)} terms</p>")
    g.search.value = "并行"
    expected = sum("并行" in f"{e.term} {e.term_zh} {e.definition}" for e in entries)
    assert 0 < expected < len(entries)
    assert g.table.value.startswith(f"<p>{expected} of {len(entries)} terms</p>")
    assert g.table.value.count("<tr><td>") == expected
    with pytest.raises(TypeError, match="entries"):
        GlossarySearch([1, 2])


def test_the_live_package_offers_what_notebooks_import():
    """``from course_lib.live import Slider, live_figure``: the package re-exports the names
    notebooks use, the very objects of its modules (no copies, no second definitions)."""
    import course_lib.live
    from course_lib.live import glossary, widgets

    assert set(course_lib.live.__all__) == {"Choice", "GlossarySearch", "Slider", "link_sliders", "live_figure"}
    for name in course_lib.live.__all__:
        home = glossary if name == "GlossarySearch" else widgets
        assert getattr(course_lib.live, name) is getattr(home, name), name


# ------------------------------------------------------------------ issue 16: scales, HiDPI, fallback states
def test_png_is_rendered_at_2x_and_shown_at_display_size(untouched):
    import struct

    fig = untouched
    width = struct.unpack(">I", fig.initial_png[16:20])[0]
    bundle, metadata = fig._repr_mimebundle_()
    assert width >= 1000
    assert fig.image.width == str(width // 2)
    assert metadata == {"image/png": {"width": width // 2}}


def test_fraction_slider_reaches_the_region_near_one():
    from course_lib.live.widgets import fraction_steps

    steps = fraction_steps(0.0, 1.0, 0.05)
    assert {0.995, 0.998, 0.999, 1.0} <= set(steps) and 0.5 in steps
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    assert all(g > 0 for g in gaps) and gaps[-1] < gaps[0]  # finer towards 1
    fig = live_figure(laws_figure, [Slider("p", "p", 0, 1, 0.05, 0.95, kind="fraction"),
                                    Slider("n", "N", 0, 10, 1, 16, kind="log2")])
    fig.controls["p"].value = 0.999
    assert fig.values()["p"] == 0.999 and isinstance(fig.values()["p"], float)
    with pytest.raises(ValueError, match="0 <= min < max <= 1"):
        Slider("p", "p", 0, 2, 0.05, 0.5, kind="fraction")


def test_log_sliders_give_floats_unless_whole_powers_of_two():
    link = Slider("bandwidth", "link", 0, 2.6, 0.01, 25, kind="log", unit="Gbit/s")
    assert link.bounds == (1.0, 398.107170553) and not link.integer
    assert link.convert(link.make_widget().value) == 25.0
    beta = Slider("beta", "β", 0, 10, 0.01, 12.5, kind="log2")
    assert beta.convert(12.5) == 12.5  # fractional steps: not rounded to 12
    assert Slider("n", "N", 0, 10, 1, 16, kind="log2").convert(16.0000001) == 16


def test_a_following_slider_moves_with_its_control_in_one_redraw():
    from course_lib.live.widgets import Choice

    renders = []

    def plot(device, u):
        renders.append((device, u))
        return laws_figure(u, 4)

    rule = {"slow": 0.3, "fast": 0.6}
    fig = live_figure(plot, [Choice("device", "device", ["slow", "fast"], "slow"),
                             Slider("u", "utilisation", 0.01, 1, 0.01, 0.3, follows=("device", rule.get))])
    fig.controls["u"].value = 0.8
    renders.clear()
    fig.controls["device"].value = "fast"
    assert fig.values() == {"device": "fast", "u": 0.6}  # reset to the new device's value
    assert renders == [("fast", 0.6)]  # one redraw, with both values
    with pytest.raises(ValueError, match="follows 'gpu'"):
        live_figure(plot, [Slider("u", "u", 0, 1, 0.1, 0.5, follows=("gpu", rule.get))])
    with pytest.raises(TypeError, match="follows must be"):
        Slider("u", "u", 0, 1, 0.1, 0.5, follows="device")


@pytest.mark.slow  # more than 3 s on two free cores (make test runs it, make test-fast does not)
def test_fallback_shows_the_states_under_the_initial_one_and_the_widget_starts_at_the_initial():
    import io

    from matplotlib.image import imread

    plain = live_figure(laws_figure, _sliders())
    fig = live_figure(laws_figure, _sliders(), states=[{"n": 256}, {"p": 0.99, "n": 256}])
    assert fig.initial_png == plain.initial_png == fig.image.value  # byte-identical initial state
    one = imread(io.BytesIO(fig.initial_png))
    stacked = imread(io.BytesIO(fig._repr_mimebundle_()[0]["image/png"]))
    assert stacked.shape[1] == one.shape[1] and stacked.shape[0] > 3 * one.shape[0]
    # the first figure in the stack, under its caption band, is the initial state pixel for pixel
    band = stacked.shape[0] - 3 * one.shape[0]
    assert band % 3 == 0
    first = stacked[band // 3: band // 3 + one.shape[0], :, : one.shape[2]]
    assert abs(first - one).max() < 1 / 255
    assert fig._caption(fig.values(), first=True) == "as first shown: p = 0.9, N = 16"
    fig.controls["n"].value = 64  # the live figure still works after drawing the states
    assert fig.values() == {"p": 0.9, "n": 64}
    fig.controls["n"].value = 16  # back at the initial values: the initial state's layout again
    assert (_pixels(bytes(fig.image.value)) == _pixels(fig.initial_png)).all()
    sched = live_figure(schedule_figure, [Choice("schedule", "s", ["gpipe", "1f1b"], "gpipe")],
                        stages=4, micro_batches=8, states=[{"schedule": "1f1b"}])  # one signature
    sched.controls["schedule"].value = "1f1b"
    sched.controls["schedule"].value = "gpipe"
    assert (_pixels(bytes(sched.image.value)) == _pixels(sched.initial_png)).all()
    with pytest.raises(ValueError, match="at most 2 states"):
        live_figure(laws_figure, _sliders(), states=[{"n": 2}, {"n": 4}, {"n": 8}])
    with pytest.raises(ValueError, match="each state sets some of the sliders"):
        live_figure(laws_figure, _sliders(), states=[{"devices": 2}])


def _pixels(png: bytes):
    """The RGB pixels of a PNG as uint8; an alpha channel, if any, must be all opaque."""
    import io

    from matplotlib.image import imread

    image = (imread(io.BytesIO(png), format="png") * 255).round().astype("uint8")
    if image.shape[2] == 4:
        assert (image[..., 3] == 255).all()
    return image[..., :3]


# ------------------------------------------------------------------ issue 25: sliders hold the text's values
_TYPED_SPECS = [  # every kind whose slider is a ValueSlider, at an initial value off its grid
    Slider("params_billion", "parameters", -1, 3, 0.01, 7.5, unit="billion", kind="log"),
    Slider("s", "s", 0, 10, 0.25, 12, unit="x", kind="log2"),
    Slider("bandwidth_gbit", "link", 0, 2.6, 0.01, 25, unit="Gbit/s", kind="log"),
    Slider("gradient_mb", "gradients", 0, 14, 0.01, 1360, unit="MB", kind="log2"),
    Slider("bandwidth_gb_s", "β", 0, 10, 0.01, 150, unit="GB/s", kind="log2"),
    Slider("images_million", "images", -2, 1.3, 0.01, 1.281167, unit="million", kind="log"),
    Slider("n", "N", 0, 10, 1, 16, unit="devices", kind="log2"),
    Slider("p", "p", 0.5, 1.0, 0.05, 0.953, unit="fraction", kind="fraction"),
]


@pytest.mark.parametrize("spec", _TYPED_SPECS, ids=lambda s: s.name)
def test_a_slider_starts_exactly_at_its_value_and_the_browser_cannot_move_it(spec):
    """The browser sends a SelectionSlider's index, never a number: the initial value is
    one of the stops, exactly, and nothing snaps it (FloatLogSlider made 7.5 7.58578)."""
    import ipywidgets as w

    control = spec.make_widget()
    assert control.value == spec.value and type(control.value) is type(spec.convert(spec.value))
    assert isinstance(control.slider, w.SelectionSlider) and not control.slider.readout
    labels, values = zip(*control.slider.options)
    assert values[control.slider.index] == spec.value  # what the index the browser holds means
    assert list(values) == sorted(values) and len(set(values)) == len(values)
    assert control.box.value == spec.format(spec.value) == labels[control.slider.index]
    lo, hi = spec.bounds
    assert values[0] == lo and values[-1] == hi  # the range's ends are stops


def test_log_stops_are_round_values_and_powers_of_two_stay_powers_of_two():
    link = Slider("bandwidth_gbit", "link", 0, 2.6, 0.01, 25, unit="Gbit/s", kind="log")
    assert link.grid() == [1, 2, 5, 10, 20, 50, 100, 200, 398.107170553]
    to400 = Slider("bandwidth_gbit", "link", 0, np.log10(400), 0.01, 25, unit="Gbit/s", kind="log")
    assert to400.bounds == (1.0, 400.0) and to400.grid()[-1] == 400.0 and to400.format(400.0) == "400 Gbit/s"
    assert Slider("n", "N", 0, 10, 1, 16, kind="log2").grid() == [2**k for k in range(11)]
    assert Slider("s", "s", 0, 10, 0.25, 12, kind="log2").grid()[:6] == [1, 2, 5, 10, 20, 50]


def test_readouts_use_the_course_formatters():
    from course_lib.memory import model_state_bytes
    from course_lib.plots.cost import human_count

    params, grads, beta, link, s, n = (_TYPED_SPECS[0], _TYPED_SPECS[3], _TYPED_SPECS[4], _TYPED_SPECS[2],
                                       _TYPED_SPECS[1], _TYPED_SPECS[6])
    assert params.format(7.5) == human_count(7.5e9) == "7.5B"
    assert grads.format(1360) == "1.36 GB"  # the byte formatter ModelStates prints with
    assert repr(model_state_bytes(7.5e9, 64, 0)).endswith("total=120 GB)")
    assert beta.format(150) == "150 GB/s" and link.format(25) == "25 Gbit/s"
    assert s.format(12) == "12" and n.format(1024) == "1,024" and _TYPED_SPECS[5].format(1.281167) == "1.28M"
    # a unit the value box shows is not repeated beside the label; the others are
    assert params.description == "parameters" and beta.description == "β"
    assert s.description == "s [x]" and n.description == "N [devices]"


@pytest.mark.parametrize(("spec", "typed", "kept"), [
    (_TYPED_SPECS[0], "13", 13.0), (_TYPED_SPECS[0], "13B", 13.0), (_TYPED_SPECS[0], "13 billion", 13.0),
    (_TYPED_SPECS[0], "7,25", 7.25), (_TYPED_SPECS[3], "1.5 GB", 1500.0), (_TYPED_SPECS[2], "33", 33.0),
    (_TYPED_SPECS[1], "12.5x", 12.5), (_TYPED_SPECS[7], "0.953", 0.953), (_TYPED_SPECS[7], "97%", 0.97),
    (_TYPED_SPECS[6], "12", 12),
], ids=lambda v: str(v) if not isinstance(v, Slider) else v.name)
def test_a_typed_value_is_kept_exactly(spec, typed, kept):
    control = spec.make_widget()
    control.box.value = typed
    assert control.value == kept and type(control.value) is type(kept)
    assert control.slider.value == kept and control.box.value == spec.format(kept) and control.note.value == ""
    control.slider.value = control.slider.options[0][1]  # the slider still moves over its stops
    assert control.value == spec.bounds[0]


@pytest.mark.parametrize(("typed", "words"), [("a lot", "does not start with a number"),
                                              ("5000", "outside"), ("3 ms", "a time")])
def test_a_value_that_cannot_be_used_is_explained_and_the_value_stays(typed, words):
    control = _TYPED_SPECS[0].make_widget()
    control.box.value = typed
    assert control.value == 7.5 and control.box.value == "7.5B" and words in control.note.value
    control.box.value = "8"
    assert control.value == 8.0 and control.note.value == ""


def test_a_whole_powers_of_two_slider_takes_only_whole_typed_values():
    control = Slider("n", "N", 0, 10, 1, 16, kind="log2").make_widget()
    control.box.value = "12.5"
    assert control.value == 16 and "whole number" in control.note.value


def test_live_figure_starts_at_every_given_value_and_redraws_on_typed_ones():
    from course_lib.datasets import load_hardware
    from course_lib.plots.memory import zero_memory_figure

    fig = live_figure(zero_memory_figure, [
        Slider("params_billion", "parameters", -1, 3, 0.01, 7.5, unit="billion", kind="log"),
        Slider("devices", "N", 0, 10, 1, 64, unit="devices", kind="log2"),
        Slider("zero_stage", "ZeRO stage", 0, 3, 1, 0, kind="int"),
        Choice("device_id", "device", [("A100", "a100_sxm_80gb")], "a100_sxm_80gb"),
    ], hardware=load_hardware())
    assert fig.values() == {"params_billion": 7.5, "devices": 64, "zero_stage": 0, "device_id": "a100_sxm_80gb"}
    first = bytes(fig.image.value)
    fig.controls["params_billion"].box.value = "13"
    assert fig.values()["params_billion"] == 13.0 and bytes(fig.image.value) != first
    fig.controls["params_billion"].value = 7.5  # from code, as link_sliders does
    assert (_pixels(bytes(fig.image.value)) == _pixels(fig.initial_png)).all()
    assert fig.controls["params_billion"].box.value == "7.5B"


def test_s_keeps_its_ratio_to_n_when_n_moves():
    renders = []

    def plot(p, s, n):
        renders.append((s, n))
        return amdahl_figure(p=p, s=s, n=n, n_max=1024)

    fig = live_figure(plot, [
        Slider("p", "p", 0.0, 1.0, 0.05, 0.95, kind="fraction"),
        Slider("s", "s", 0, 10, 0.25, 12, unit="x", kind="log2", scales_with="n"),
        Slider("n", "N", 0, 10, 1, 16, unit="devices", kind="log2")])
    renders.clear()
    fig.controls["n"].value = 64
    assert fig.values() == {"p": 0.95, "s": 48.0, "n": 64} and renders == [(48.0, 64)]  # one redraw
    fig.controls["s"].box.value = "32"  # s on its own: a new ratio, 1/2
    fig.controls["n"].value = 1024
    assert fig.values()["s"] == 512.0
    fig.controls["n"].value = 1
    assert fig.values()["s"] == 1.0  # clamped at the slider's lowest value
    with pytest.raises(ValueError, match="scales with 'm'"):
        live_figure(plot, [Slider("s", "s", 0, 10, 0.25, 12, kind="log2", scales_with="m")])


def test_a_float_slider_value_off_its_steps_is_refused():
    with pytest.raises(ValueError, match="not on the steps of 0.01"):
        Slider("u", "utilisation", 0.01, 1, 0.01, 0.333)
    Slider("u", "utilisation", 0.01, 1, 0.01, 0.52)  # on the steps: fine


def test_linked_value_sliders_move_together():
    from course_lib.live.widgets import link_sliders

    specs = [Slider("p", "p", 0.0, 1.0, 0.05, 0.95, kind="fraction"), Slider("n", "N", 0, 10, 1, 16, kind="log2")]
    a, b = live_figure(laws_figure, specs), live_figure(laws_figure, specs)
    link_sliders(a, b, ["p", "n"])
    a.controls["p"].box.value = "0.97"
    assert b.values() == {"p": 0.97, "n": 16} and b.controls["p"].box.value == "0.97"
