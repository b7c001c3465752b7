"""The reference run's GPU part: the GPU's measured roofline, operators placed on it, cuDNN's kernels.

Runs where ``torch.cuda.is_available()``; every function takes a ``device`` and runs with
torch on the CPU as well, so that its logic is tested on a machine without a GPU
(``python -m benchmarks reference --quick`` uses tiny sizes on the CPU there; ``--gpu cpu``
forces it). Only what CUDA alone has - CUDA events and cuDNN's kernel names - is untested
without a GPU, so every item is measured in its own ``try`` and a failure is recorded with
the item, never ending the run.

``gpu_roofline``
    The measured peaks: float32 GEMM (TF32 off), TF32 GEMM and bfloat16 GEMM (square,
    8192, warm-up, then the median of several timings by CUDA events), and the device
    memory bandwidth from a large device-to-device copy (read + write bytes counted). Then
    operators, each timed and placed on that roofline with its FLOPs and bytes from the
    course's helpers (:func:`course_lib.roofline.gemm_op`, :func:`~course_lib.roofline.elementwise_op`,
    :class:`~course_lib.roofline.Op`): the running example's step (chapter 06's MLP
    64-64-10 at B = 64 and the wide MLP 4096-4096-4096-10 at B = 1024, bfloat16) and a
    BERT-Large layer's operators (hidden 1024, 16 heads, FFN 4096, batch 32 x sequence
    512, bfloat16: QKV projection, attention scores Q K^T, attention x V, output projection,
    FFN up and down, softmax, GeLU, LayerNorm), and the whole layer's forward + backward.
    Each operator's ``eta`` is its achieved FLOP/s over the measured bfloat16 GEMM peak:
    chapter 03's eta (the sustained share of the peak), measured.
``gpu_conv``
    For each 3x3 convolution of ResNet-50 at batch 32 (64x56x56, 128x28x28, 256x14x14,
    512x7x7; stride 1, padding 1, C_out = C_in), with ``torch.backends.cudnn.benchmark``:
    its time in float32 (TF32 off), TF32 and bfloat16, and the kernels it ran (read with
    ``torch.profiler``; on the CPU the profiler gives operators instead, and the parser takes
    either), with NCHW tensors (torch's default: cuDNN adds layout transposes around an NHWC
    kernel) and with ``channels_last`` ones. The course's own algorithms on the CPU are the
    ``conv`` experiment.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from course_lib import roofline as rl
from course_lib.models import MLP

#: A BERT-Large encoder layer as timed here: (batch, sequence, hidden, heads, FFN).
BERT_LARGE_LAYER = (32, 512, 1024, 16, 4096)
#: Its stand-in for the quick run and the tests.
TINY_BERT_LAYER = (2, 16, 32, 4, 128)
#: FLOPs per element assumed for the element-wise operators (they are memory-bound: the count
#: moves their point along the intensity axis, not their time).
ELEMENTWISE_FLOPS = {"softmax": 5, "GeLU": 8, "LayerNorm": 8, "ReLU": 1}
DTYPES = ("float32", "tf32", "bfloat16")
#: The GEMMs of a BERT-Large layer (:func:`bert_layer_specs`); the rest is element-wise.
BERT_GEMMS = ("QKV projection", "attention scores Q K^T", "attention x V", "output projection", "FFN up", "FFN down")


# ------------------------------------------------------------------ device and timing
def choose_device(plan):
    """``(torch, "cuda" | "cpu")`` for this run, or a string saying why the GPU part is skipped."""
    if plan.gpu == "off":
        return "the GPU part was switched off (--gpu off)"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if plan.gpu == "cpu":
        return torch, "cpu"
    if torch.cuda.is_available():
        return torch, "cuda"
    if plan.gpu == "cuda":
        raise RuntimeError("--gpu cuda was asked for, but torch.cuda.is_available() is False")
    return (torch, "cpu") if plan.quick else "no CUDA device (torch.cuda.is_available() is False)"


@contextlib.contextmanager
def torch_threads(torch, device: str):
    """On the CPU, one torch thread (the logic under test, not its speed: on a shared machine a
    second thread waits for a core at every parallel region); on a GPU nothing changes."""
    if device.startswith("cuda"):
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _sync(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _window(torch, device: str, fn: Callable[[], object], number: int) -> float:
    """Seconds per call of ``number`` calls back to back (CUDA events on a GPU)."""
    if device.startswith("cuda"):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / number
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def time_calls(torch, device: str, fn: Callable[[], object], *, repeat: int = 10, warmup: int = 3,
               min_window: float = 1e-3) -> dict:
    """Median seconds of one call of ``fn`` after ``warmup`` calls: ``repeat`` windows, each of
    enough calls back to back to last ``min_window`` seconds (a kernel of a few microseconds
    is timed over many launches). Returns ``{"seconds", "times", "calls_per_window"}``."""
    for _ in range(warmup):
        fn()
    _sync(torch, device)
    one = _window(torch, device, fn, 1)
    number = int(min(1000, max(1, math.ceil(min_window / max(one, 1e-9)))))
    times = [_window(torch, device, fn, number) for _ in range(repeat)]
    return {"seconds": statistics.median(times), "times": times, "calls_per_window": number}


@contextlib.contextmanager
def tf32(torch, enabled: bool):
    """TF32 for float32 matrix products and convolutions on or off (the legacy flags only:
    mixing them with ``fp32_precision`` makes torch raise), restored afterwards."""
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = bool(enabled)
    torch.backends.cudnn.allow_tf32 = bool(enabled)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _dtype(torch, name: str):
    return torch.bfloat16 if name == "bfloat16" else torch.float32


def _error(where: str, exc: BaseException) -> dict:
    return {"part": where, "type": type(exc).__name__, "message": str(exc)[:1000],
            "traceback": traceback.format_exc()[-3000:]}


def device_info(torch, device: str) -> dict:
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        return {"device": device, "name": p.name, "memory_bytes": int(p.total_memory),
                "capability": f"{p.major}.{p.minor}", "multiprocessors": int(p.multi_processor_count)}
    return {"device": "cpu", "name": "torch on the CPU (a test of the GPU part's logic)",
            "threads": torch.get_num_threads()}


# ------------------------------------------------------------------ peaks
def gemm_peak(torch, device: str, name: str, size: int, *, repeat: int = 10) -> dict:
    """FLOP/s of a ``size``^3 GEMM in ``name`` ("float32": TF32 off, "tf32", "bfloat16")."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=_dtype(torch, name), generator=gen)
    b = torch.randn(size, size, device=device, dtype=_dtype(torch, name), generator=gen)
    c = torch.empty_like(a)
    with tf32(torch, name == "tf32"):
        t = time_calls(torch, device, lambda: torch.matmul(a, b, out=c), repeat=repeat)
    return {"dtype": name, "size": size, "flops": 2.0 * size**3, "seconds": t["seconds"],
            "flops_per_second": 2.0 * size**3 / t["seconds"], "times": t["times"]}


def copy_bandwidth(torch, device: str, nbytes: int, *, repeat: int = 10) -> dict:
    """Bytes/s of a device-to-device copy of ``nbytes``: 2 x ``nbytes`` moved (read + write)."""
    src = torch.ones(nbytes // 4, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    t = time_calls(torch, device, lambda: dst.copy_(src), repeat=repeat)
    moved = 2.0 * (nbytes // 4) * 4
    return {"nbytes": (nbytes // 4) * 4, "bytes_moved": moved, "seconds": t["seconds"],
            "bytes_per_second": moved / t["seconds"]}


# ------------------------------------------------------------------ operators
@dataclass(frozen=True)
class OpSpec:
    """An operator to time: its ``group``, the course's :class:`~course_lib.roofline.Op`
    (FLOPs, bytes), and ``make(torch, device)``, which allocates its operands once and
    returns the call to time."""

    group: str
    op: rl.Op
    make: Callable


def _gemm_spec(group, name, m, k, n, *, batches=1, a_t=False, b_t=False) -> OpSpec:
    """A (batched) GEMM (m x k) @ (k x n) in bfloat16; ``a_t``/``b_t``: the operand is a transposed view."""
    g = rl.gemm_op(m, k, n, itemsize=2, name=name)
    op = g if batches == 1 else rl.Op(name, batches * g.flops, batches * g.nbytes)

    def make(torch, device):
        gen = torch.Generator(device=device).manual_seed(0)
        lead = (batches,) if batches > 1 else ()
        a = torch.randn(*lead, *((k, m) if a_t else (m, k)), device=device, dtype=torch.bfloat16, generator=gen)
        b = torch.randn(*lead, *((n, k) if b_t else (k, n)), device=device, dtype=torch.bfloat16, generator=gen)
        a, b = (a.transpose(-1, -2) if a_t else a), (b.transpose(-1, -2) if b_t else b)
        return lambda: torch.matmul(a, b)

    return OpSpec(group, op, make)


def _elementwise_spec(group, name, shape, kind, *, inputs=1, flops=None) -> OpSpec:
    n = math.prod(shape)
    op = rl.elementwise_op(n, inputs=inputs, flops_per_element=ELEMENTWISE_FLOPS.get(kind, 1) if flops is None
                           else flops, itemsize=2, name=name)

    def make(torch, device):
        x = torch.randn(*shape, device=device, dtype=torch.bfloat16)
        if kind == "softmax":
            return lambda: torch.softmax(x, dim=-1)
        if kind == "GeLU":
            return lambda: torch.nn.functional.gelu(x)
        if kind == "LayerNorm":
            w = torch.ones(shape[-1], device=device, dtype=torch.bfloat16)
            b = torch.zeros(shape[-1], device=device, dtype=torch.bfloat16)
            return lambda: torch.nn.functional.layer_norm(x, (shape[-1],), w, b)
        if kind == "ReLU":
            return lambda: torch.relu(x)
        if kind == "SGD":
            g = torch.randn(*shape, device=device, dtype=torch.bfloat16)
            return lambda: x.add_(g, alpha=-1e-3)
        raise ValueError(f"unknown element-wise kind {kind!r}")

    return OpSpec(group, op, make)


def mlp_specs(sizes, batch: int, group: str) -> list[OpSpec]:
    """The GEMMs and element-wise operators of one training step of an MLP, named as
    :func:`course_lib.roofline.mlp_step_ops` names them (bfloat16)."""
    model = MLP(tuple(sizes))
    layers = list(zip(model.sizes[:-1], model.sizes[1:], strict=True))
    last = len(layers) - 1
    specs = []
    for i, (fi, fo) in enumerate(layers):
        specs.append(_gemm_spec(group, f"L{i} forward GEMM", batch, fi, fo))
        if i < last:
            specs.append(_elementwise_spec(group, f"L{i} ReLU", (batch, fo), "ReLU"))
    for i, (fi, fo) in reversed(list(enumerate(layers))):
        specs.append(_gemm_spec(group, f"L{i} weight-gradient GEMM", fi, batch, fo, a_t=True))
        if i > 0:
            specs.append(_gemm_spec(group, f"L{i} input-gradient GEMM", batch, fo, fi, b_t=True))
    specs.append(_elementwise_spec(group, "SGD update", (model.n_params,), "SGD", inputs=2, flops=2))
    return specs


def bert_layer_specs(batch: int, seq: int, hidden: int, heads: int, ffn: int) -> list[OpSpec]:
    """A BERT-Large encoder layer's operators (bfloat16): its six GEMMs and three element-wise ones."""
    group, tokens, d, bh = "BERT-Large layer", batch * seq, hidden // heads, batch * heads
    return [
        _gemm_spec(group, "QKV projection", tokens, hidden, 3 * hidden),
        _gemm_spec(group, "attention scores Q K^T", seq, d, seq, batches=bh, b_t=True),
        _elementwise_spec(group, "softmax", (bh, seq, seq), "softmax"),
        _gemm_spec(group, "attention x V", seq, seq, d, batches=bh),
        _gemm_spec(group, "output projection", tokens, hidden, hidden),
        _elementwise_spec(group, "LayerNorm", (tokens, hidden), "LayerNorm"),
        _gemm_spec(group, "FFN up", tokens, hidden, ffn),
        _elementwise_spec(group, "GeLU", (tokens, ffn), "GeLU"),
        _gemm_spec(group, "FFN down", tokens, ffn, hidden),
    ]


def place(op: rl.Op, seconds: float, peak: float, bandwidth: float) -> dict:
    """``op`` measured at ``seconds`` on the roofline (``peak`` FLOP/s, ``bandwidth`` B/s):
    achieved FLOP/s and B/s, ``eta`` = achieved / peak, the attainable rate min(peak, I x bandwidth)
    and the share of it, the share of the bandwidth, and which roof bounds it.

    >>> p = place(rl.Op("x", 2e9, 1e8), 0.01, 1e12, 1e10)
    >>> p["achieved_flops"], p["eta"], p["attainable_flops"], p["share_of_roofline"], p["bound"]
    (200000000000.0, 0.2, 200000000000.0, 1.0, 'memory')
    """
    roof = rl.Roofline(peak, bandwidth)
    achieved = op.flops / seconds
    attainable = float(roof.attainable(op.intensity))
    return {"name": op.name, "flops": op.flops, "nbytes": op.nbytes, "intensity": op.intensity,
            "seconds": seconds, "achieved_flops": achieved, "achieved_bytes_per_second": op.nbytes / seconds,
            "eta": achieved / peak, "attainable_flops": attainable, "share_of_roofline": achieved / attainable,
            "share_of_bandwidth": op.nbytes / seconds / bandwidth, "bound": roof.bound(op)}


def _layer_forward_backward(torch, device, batch, seq, hidden, heads, ffn, repeat) -> dict:
    layer = torch.nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.0, activation="gelu", batch_first=True,
                                             device=device, dtype=torch.bfloat16)
    x = torch.randn(batch, seq, hidden, device=device, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(batch, seq, hidden, device=device, dtype=torch.bfloat16)

    def step():
        layer(x).backward(grad)

    t = time_calls(torch, device, step, repeat=repeat, warmup=3, min_window=0)
    forward = sum(s.op.flops for s in bert_layer_specs(batch, seq, hidden, heads, ffn) if s.op.name in BERT_GEMMS)
    flops = 3.0 * forward  # the backward of a GEMM is two GEMMs of the same size
    return {"module": "torch.nn.TransformerEncoderLayer (dropout 0, GeLU), bfloat16", "seconds": t["seconds"],
            "gemm_flops": flops, "achieved_flops": flops / t["seconds"]}


def gpu_roofline(plan) -> dict:
    """The GPU's measured peaks and bandwidth; the running example's and BERT-Large's operators on them."""
    chosen = choose_device(plan)
    if isinstance(chosen, str):
        return {"skipped": chosen}
    torch, device = chosen
    with torch_threads(torch, device):
        return _gpu_roofline(torch, device, plan.quick or device == "cpu")


def _gpu_roofline(torch, device: str, small: bool) -> dict:
    size, nbytes, repeat = (64, 2**20, 2) if small else (8192, 2**30, 10)
    errors: list[dict] = []
    out: dict = {"device": device_info(torch, device), "peaks": {}, "operators": [], "errors": errors}
    for name in DTYPES:
        try:
            out["peaks"][name] = gemm_peak(torch, device, name, size, repeat=repeat)
        except Exception as exc:  # noqa: BLE001
            errors.append(_error(f"peak {name}", exc))
    try:
        out["memory"] = copy_bandwidth(torch, device, nbytes, repeat=repeat)
    except Exception as exc:  # noqa: BLE001
        errors.append(_error("memory bandwidth", exc))
    if "bfloat16" not in out["peaks"] or "memory" not in out:
        raise RuntimeError("no bfloat16 peak or no bandwidth: " + "; ".join(e["message"] for e in errors))
    peak, bandwidth = out["peaks"]["bfloat16"]["flops_per_second"], out["memory"]["bytes_per_second"]
    out["eta_of"] = ("eta = achieved FLOP/s / the measured bfloat16 GEMM peak (peaks.bfloat16); every operator "
                     "runs in bfloat16; the roof is min(that peak, intensity x memory.bytes_per_second)")
    wide = ((128, 128, 128, 10), 32) if small else ((4096, 4096, 4096, 10), 1024)
    bert = TINY_BERT_LAYER if small else BERT_LARGE_LAYER
    specs = (mlp_specs((64, 64, 10), 64, "running example 64-64-10, B = 64")
             + mlp_specs(wide[0], wide[1], f"wide MLP {'-'.join(map(str, wide[0]))}, B = {wide[1]}")
             + bert_layer_specs(*bert))
    out["bert_layer"] = dict(zip(("batch", "sequence", "hidden", "heads", "ffn"), bert, strict=True))
    out["elementwise_flops_per_element"] = ELEMENTWISE_FLOPS
    for spec in specs:
        try:
            t = time_calls(torch, device, spec.make(torch, device), repeat=repeat)
            out["operators"].append({"group": spec.group, "dtype": "bfloat16",
                                     **place(spec.op, t["seconds"], peak, bandwidth)})
        except Exception as exc:  # noqa: BLE001
            errors.append(_error(f"{spec.group}: {spec.op.name}", exc))
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    try:
        layer = _layer_forward_backward(torch, device, *bert, repeat=repeat)
        out["bert_layer_forward_backward"] = {**layer, "eta": layer["achieved_flops"] / peak}
    except Exception as exc:  # noqa: BLE001
        errors.append(_error("BERT-Large layer forward + backward", exc))
    return out


# ------------------------------------------------------------------ cuDNN's kernels
#: Profiler rows that only wrap the work (CPU operators above the one that runs it).
_WRAPPERS = ("aten::conv2d", "aten::convolution", "aten::_convolution", "aten::empty", "aten::empty_strided",
             "aten::resize_", "aten::contiguous", "aten::as_strided", "cudaDeviceSynchronize",
             "cudaEventRecord", "cudaLaunchKernel", "cudaStreamIsCapturing", "cudaFuncGetAttributes",
             "cuLaunchKernel", "cudaMemsetAsync", "cudaPeekAtLastError", "cudaGetDriverEntryPoint")


def pick_kernels(rows, limit: int = 8, calls: int = 1) -> dict:
    """What ran, from profiler rows ``(name, device_type, self_cpu_us, self_device_us, count)``
    of ``calls`` calls.

    With GPU rows (device type CUDA, or device time and no CPU time of their own: the
    kernels), those, longest first; else (torch on the CPU) the CPU operators that are not
    mere wrappers (:data:`_WRAPPERS`), longest self time first. ``main`` is the first;
    ``busy_seconds`` the time of all of them per call and ``main_seconds`` the main one's
    per call (on a GPU: the kernels' time, without the gaps between launches).

    >>> rows = [("aten::conv2d", "CPU", 5.0, 0.0, 1), ("aten::cudnn_convolution", "CPU", 20.0, 30.0, 1),
    ...         ("sm90_xmma_fprop_implicit_gemm_bf16", "CUDA", 0.0, 25.0, 1), ("nchwToNhwcKernel", "CUDA", 0.0, 5.0, 2)]
    >>> k = pick_kernels(rows); k["kind"], k["main"], [r["name"] for r in k["kernels"]]
    ('gpu kernels', 'sm90_xmma_fprop_implicit_gemm_bf16', ['sm90_xmma_fprop_implicit_gemm_bf16', 'nchwToNhwcKernel'])
    >>> pick_kernels([("aten::conv2d", "CPU", 9.0, 0.0, 1), ("aten::mkldnn_convolution", "CPU", 7.0, 0.0, 1)])["main"]
    'aten::mkldnn_convolution'
    """
    rows = [(str(n), str(d).rsplit(".", 1)[-1].upper(), float(c or 0), float(g or 0), int(k or 0))
            for n, d, c, g, k in rows]
    gpu = [r for r in rows if (r[1] == "CUDA" or (r[3] > 0 and r[2] == 0))]
    if gpu:
        chosen, kind, key = gpu, "gpu kernels", 3
    else:
        chosen, kind, key = [r for r in rows if r[0] not in _WRAPPERS and r[2] > 0], "cpu operators", 2
    chosen = sorted(chosen, key=lambda r: -r[key])
    per_call = 1e-6 / max(1, int(calls))
    return {"kind": kind, "main": chosen[0][0] if chosen else None,
            "main_seconds": chosen[0][key] * per_call if chosen else None,
            "busy_seconds": sum(r[key] for r in chosen) * per_call,
            "kernels": [{"name": r[0], "count": r[4], "microseconds": r[key]} for r in chosen[:limit]]}


def profile_rows(torch, device: str, fn: Callable[[], object], calls: int = 3) -> list[tuple]:
    """``torch.profiler`` rows (name, device type, self CPU us, self device us, count) of ``calls`` calls."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            fn()
        _sync(torch, device)
    return [(e.key, e.device_type, e.self_cpu_time_total, getattr(e, "self_device_time_total", 0), e.count)
            for e in prof.key_averages()]


def _conv_entry(torch, device, x, w, dtype: str, macs: int, repeat: int, where: str, errors: list) -> dict:
    """One convolution timed (the warm-up runs cuDNN's search) and profiled: its time, rate and kernels."""
    with tf32(torch, dtype == "tf32"), torch.no_grad():
        fn = lambda: torch.nn.functional.conv2d(x, w, padding=1)  # noqa: E731
        t = time_calls(torch, device, fn, repeat=repeat, warmup=3)
        entry = {"seconds": t["seconds"], "flops_per_second": 2.0 * macs / t["seconds"]}
        try:
            entry.update(pick_kernels(profile_rows(torch, device, fn, calls=3), calls=3))
        except Exception as exc:  # noqa: BLE001 - the time stands without the kernel names
            errors.append(_error(f"{where} profiler", exc))
    return entry


def gpu_conv(plan) -> dict:
    """cuDNN on ResNet-50's 3x3 layers: the kernels it runs and their times in float32, TF32, bfloat16."""
    chosen = choose_device(plan)
    if isinstance(chosen, str):
        return {"skipped": chosen}
    torch, device = chosen
    with torch_threads(torch, device):
        return _gpu_conv(torch, device, plan.quick or device == "cpu")


def _gpu_conv(torch, device: str, small: bool) -> dict:
    from course_lib.conv.algorithms import resnet50_3x3_layers
    from course_lib.cost import conv2d_macs

    batch, repeat = (1, 2) if small else (32, 20)
    layers = [(la.name, la.x_shape, la.w_shape) for la in resnet50_3x3_layers(batch)]
    if small:
        layers = [(name, (1, 4, 8, 8), (4, 4, 3, 3)) for name, _, _ in layers[:2]]
    old_benchmark = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    errors, rows = [], []
    try:
        for name, x_shape, w_shape in layers:
            macs = conv2d_macs(w_shape[1], w_shape[0], 3, x_shape[2], padding=1, batch=x_shape[0])
            row = {"name": name, "x_shape": list(x_shape), "w_shape": list(w_shape), "padding": 1, "macs": macs,
                   "by_dtype": {}}
            for dtype in DTYPES:
                try:
                    gen = torch.Generator(device=device).manual_seed(0)
                    x = torch.randn(*x_shape, device=device, dtype=_dtype(torch, dtype), generator=gen)
                    w = torch.randn(*w_shape, device=device, dtype=_dtype(torch, dtype), generator=gen)
                    entry = _conv_entry(torch, device, x, w, dtype, macs, repeat, f"{name} {dtype}", errors)
                    try:  # NHWC tensors: no layout transposes around the kernel (what AMP training uses)
                        cl = torch.channels_last
                        entry["channels_last"] = _conv_entry(torch, device, x.to(memory_format=cl),
                                                             w.to(memory_format=cl), dtype, macs, repeat,
                                                             f"{name} {dtype} channels_last", errors)
                    except Exception as exc:  # noqa: BLE001
                        errors.append(_error(f"{name} {dtype} channels_last", exc))
                    row["by_dtype"][dtype] = entry
                except Exception as exc:  # noqa: BLE001
                    errors.append(_error(f"{name} {dtype}", exc))
            rows.append(row)
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    finally:
        torch.backends.cudnn.benchmark = old_benchmark
    return {"device": device_info(torch, device), "batch": batch, "dtypes": list(DTYPES),
            "layout": "NCHW tensors (torch's default; cuDNN may add layout transposes), and under 'channels_last' "
                      "NHWC tensors; 'seconds' from CUDA events (back-to-back calls), 'busy_seconds' and "
                      "'main_seconds' the profiled kernels' time per call",
            "cudnn_benchmark": True, "layers": rows, "cpu_reference": "the 'conv' experiment (course_lib.conv)",
            "errors": errors}


#: (name, chapter, function): the GPU part of the run.
EXPERIMENTS = [
    ("gpu_roofline", "03/06", gpu_roofline),
    ("gpu_conv", "05/06", gpu_conv),
]
