"""The numpy transformer (course_lib.transformer): gradients against finite differences and
torch autograd, its layout, training on the digits as sequences (by the running example's
serial loop, course_lib.models.train), and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.datasets import load_digits
from course_lib.optim import SGD
from course_lib.parallel.train.reference import train_serial
from course_lib.transformer import (
    DIGITS_TRANSFORMER,
    Transformer,
    attention,
    digit_sequences,
    layer_norm,
)

TINY = Transformer(seq_length=4, token_size=3, hidden=8, heads=2, n_layers=2, ffn=6, classes=3)
RNG = np.random.default_rng(7)
X_TINY = RNG.standard_normal((5, 4, 3))
Y_TINY = np.array([0, 2, 1, 1, 2])


def _params(model, seed=1):
    """Initial parameters with non-trivial gains and biases (so that their gradients matter)."""
    p = model.init_params(seed)
    return p + 0.1 * np.random.default_rng(seed + 100).standard_normal(p.size)


# ------------------------------------------------------------------ gradients
def test_gradient_equals_central_finite_differences():
    """Three entries of every parameter tensor (the first, the last, one between)."""
    p = _params(TINY)
    loss, grad = TINY.loss_and_grad(p, X_TINY, Y_TINY)
    eps, num = 1e-6, np.zeros_like(p)
    picks = sorted({i for s in TINY.slots for i in (s.offset, s.offset + s.size // 2, s.offset + s.size - 1)})
    for i in picks:
        q = p.copy()
        q[i] += eps
        up, _ = TINY.loss_and_grad(q, X_TINY, Y_TINY)
        q[i] -= 2 * eps
        down, _ = TINY.loss_and_grad(q, X_TINY, Y_TINY)
        num[i] = (up - down) / (2 * eps)
    assert np.abs(num[picks] - grad[picks]).max() < 1e-7 * max(1.0, np.abs(grad).max())
    assert (np.abs(grad) > 0).mean() > 0.95  # every kind of parameter gets a gradient


@pytest.mark.slow  # importing torch takes seconds
def test_gradient_equals_torch_autograd():
    torch = pytest.importorskip("torch")
    model, p = TINY, _params(TINY, seed=3)
    loss, grad = model.loss_and_grad(p, X_TINY, Y_TINY)
    tp = torch.tensor(p, requires_grad=True)
    w = {s.name: tp[s.offset : s.offset + s.size].reshape(s.shape) for s in model.slots}
    ln = torch.nn.functional.layer_norm

    def norm(z, name):
        return ln(z, (model.hidden,), w[name + ".g"], w[name + ".b"], eps=1e-5)

    x = torch.tensor(X_TINY)
    z = x @ w["embed.W"] + w["embed.b"] + w["pos"]
    b, s, h, a = x.shape[0], model.seq_length, model.hidden, model.heads
    for i in range(model.n_layers):
        def ww(n, i=i):
            return w[f"l{i}.{n}"]
        t = norm(z, f"l{i}.ln1")
        q, k, v = ((t @ ww("W" + n) + ww("b" + n)).reshape(b, s, a, h // a).transpose(1, 2) for n in "qkv")
        probs = torch.softmax(q @ k.transpose(-1, -2) / (h // a) ** 0.5, dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(b, s, h)
        z = z + ctx @ ww("Wo") + ww("bo")
        z = z + torch.relu(norm(z, f"l{i}.ln2") @ ww("W1") + ww("b1")) @ ww("W2") + ww("b2")
    logits = norm(z, "final").mean(dim=1) @ w["head.W"] + w["head.b"]
    ref = torch.nn.functional.cross_entropy(logits, torch.tensor(Y_TINY))
    ref.backward()
    assert abs(ref.item() - loss) < 1e-12
    np.testing.assert_allclose(grad, tp.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_sum_reduction_is_batch_times_the_mean_and_out_is_overwritten():
    p = _params(TINY)
    mean_loss, mean_grad = TINY.loss_and_grad(p, X_TINY, Y_TINY)
    out = np.full(TINY.n_params, 7.0)
    sum_loss, sum_grad = TINY.loss_and_grad(p, X_TINY, Y_TINY, reduction="sum", out=out)
    assert sum_grad is out
    assert sum_loss == pytest.approx(5 * mean_loss, rel=1e-12)
    np.testing.assert_allclose(sum_grad, 5 * mean_grad, rtol=1e-10, atol=1e-14)


# ------------------------------------------------------------------ the pieces
def test_heads_are_independent_so_any_subset_is_its_columns():
    """Attention of heads 1-2 of 4 alone equals columns 1-2 of all four: the split by heads needs no exchange."""
    q, k, v = (np.random.default_rng(i).standard_normal((2, 5, 12)) for i in range(3))
    full, probs = attention(q, k, v, head_size=3)
    part, part_probs = attention(q[..., 3:9], k[..., 3:9], v[..., 3:9], head_size=3)
    np.testing.assert_allclose(part, full[..., 3:9], rtol=1e-13)
    np.testing.assert_allclose(part_probs, probs[:, 1:3], rtol=1e-13)
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-13)


def test_layer_norm_gives_zero_mean_unit_variance_rows():
    x = np.random.default_rng(0).standard_normal((3, 4, 16)) * 5 + 2
    y, _ = layer_norm(x, np.ones(16), np.zeros(16))
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1 / (1 + 1e-5 / x.var(axis=-1)), rtol=1e-9)


def test_layout_slots_tile_the_buffer_and_the_parameter_count_is_by_hand():
    m = TINY
    ends = [s.offset + s.size for s in m.slots]
    assert [s.offset for s in m.slots] == [0, *ends[:-1]] and ends[-1] == m.n_params
    block = 4 * 8 + 4 * (8 * 8 + 8) + (8 * 6 + 6) + (6 * 8 + 8)
    assert m.n_params == (3 * 8 + 8) + 4 * 8 + 2 * block + 2 * 8 + (8 * 3 + 3)
    assert DIGITS_TRANSFORMER.n_params == 18026
    assert Transformer(hidden=12, heads=3).ffn == 48


def test_init_is_seeded_and_layer_norm_gains_start_at_one():
    a, b = TINY.init_params(4), TINY.init_params(4)
    assert np.array_equal(a, b) and not np.array_equal(a, TINY.init_params(5))
    views = TINY.views(a)
    assert (views["l1.ln2.g"] == 1).all() and (views["l0.bq"] == 0).all()
    assert Transformer(hidden=8, heads=2, dtype=np.float32).init_params(0).dtype == np.float32


def test_digit_sequences_are_the_image_rows():
    d = load_digits("test")
    seq = digit_sequences(d.x[:4])
    assert seq.shape == (4, 8, 8)
    np.testing.assert_array_equal(seq * 16, d.images[:4])


# ------------------------------------------------------------------ training
def test_a_small_fixed_run_learns_the_digits_and_is_deterministic():
    """1 block, h = 16, 2 epochs on the training digits: measured 0.777 test accuracy (279 of 359)
    (seed 0, SGD momentum); threshold 0.74 (chance: 0.1)."""
    tr, te = load_digits("train"), load_digits("test")
    model = Transformer(hidden=16, heads=4, n_layers=1, ffn=32)
    kw = dict(batch_size=32, epochs=2, seed=0, optimizer=SGD(0.05, momentum=0.9),
              x_test=digit_sequences(te.x), y_test=te.y)
    run = train_serial(model, digit_sequences(tr.x), tr.y, **kw)
    assert run.steps == 2 * 45 and run.loss[-10:].mean() < run.loss[:10].mean() / 2
    assert run.test_accuracy[-1] >= 0.74
    kw = dict(batch_size=50, epochs=1, seed=0)
    again = train_serial(model, digit_sequences(tr.x[:100]), tr.y[:100], **kw)
    assert np.array_equal(again.params, train_serial(model, digit_sequences(tr.x[:100]), tr.y[:100], **kw).params)


@pytest.mark.slow
def test_the_course_variant_reaches_the_stated_accuracy():
    """DIGITS_TRANSFORMER's docstring: 93.0 % after 8 epochs (measured 334 of 359)."""
    tr, te = load_digits("train"), load_digits("test")
    run = train_serial(DIGITS_TRANSFORMER, digit_sequences(tr.x), tr.y, batch_size=32, epochs=8, seed=0,
                optimizer=SGD(0.05, momentum=0.9), x_test=digit_sequences(te.x), y_test=te.y)
    assert run.test_accuracy[-1] >= 0.92


def test_plain_sgd_step_is_params_minus_lr_times_the_gradient():
    p0 = TINY.init_params(0)
    run = train_serial(TINY, X_TINY, Y_TINY, batch_size=5, epochs=1, lr=0.3, seed=0)
    _, g = TINY.loss_and_grad(p0, X_TINY, Y_TINY)
    np.testing.assert_allclose(run.params, p0 - 0.3 * g, rtol=1e-14, atol=1e-16)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    ({"hidden": 10, "heads": 4}, ValueError, "hidden"),
    ({"heads": 0}, ValueError, "heads"),
    ({"n_layers": 1.5}, TypeError, "n_layers"),
    ({"classes": 1}, ValueError, "classes"),
    ({"ffn": 0}, ValueError, "ffn"),
    ({"dtype": np.int32}, TypeError, "dtype"),
])
def test_bad_model_arguments_name_the_parameter(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        Transformer(**kwargs)


@pytest.mark.parametrize(("call", "exc", "name"), [
    (lambda: TINY.forward(TINY.init_params(0), np.zeros((2, 4, 4))), ValueError, "x must have shape"),
    (lambda: TINY.forward(TINY.init_params(0), np.zeros((2, 4, 3), int)), TypeError, "x must be a float"),
    (lambda: TINY.forward(np.zeros(3), X_TINY), ValueError, "flat"),
    (lambda: TINY.loss_and_grad(TINY.init_params(0), X_TINY, Y_TINY + 5), ValueError, "y must"),
    (lambda: train_serial(TINY, X_TINY, Y_TINY, batch_size=5, lr=-1.0), ValueError, "lr"),
    (lambda: train_serial(TINY, X_TINY, Y_TINY, batch_size=5, optimizer=3), TypeError, "optimizer"),
    (lambda: train_serial(TINY, X_TINY, Y_TINY, batch_size=5, params=np.zeros(3)), ValueError, "params"),
    (lambda: digit_sequences(np.zeros((2, 63))), ValueError, "x must have shape"),
])
def test_bad_input_names_the_parameter(call, exc, name):
    with pytest.raises(exc, match=name):
        call()
