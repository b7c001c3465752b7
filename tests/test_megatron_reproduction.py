"""The Megatron-LM reproduction with the pipeline bubble (virtual stages) and the tensor-parallel
all-reduces priced on NVLink: hand values for the 145B row of data/megatron_configs.csv."""

import math

import pytest

from course_lib import alpha_beta, memory, planner, schedule, tensor_cost
from course_lib.datasets import load_hardware, load_megatron_configs

HW = load_hardware()
CONFIGS = {c.model: c for c in load_megatron_configs()}
NVLINK = planner.device_parameters("a100_sxm_80gb")["bandwidth"]  # 600 GB/s both ways: 300 GB/s


def test_145b_row_by_hand():
    # 145B: 80 layers, h = 12288, t = 8, p = 8, 1536 GPUs, B = 2304, b = 2, 5 layers per virtual stage
    est = memory.megatron_estimate(CONFIGS["145B"], hardware=HW)
    d = 1536 // (8 * 8)  # 24 replicas
    m = 2304 // (d * 2)  # 48 micro-batches
    v = 80 // (8 * 5)  # 2 chunks per GPU
    assert (est.data_parallel, est.micro_batches, est.virtual_stages) == (24, 48, 2) == (d, m, v)
    assert est.bubble == pytest.approx(7 / (2 * 48 + 7))  # (p - 1)/(v m + p - 1)
    assert est.bubble_time == pytest.approx(est.bubble * est.iteration_time)
    tr = tensor_cost.megatron_tensor_traffic(est, NVLINK)
    payload = 2 * 2048 * 12288 * 2  # b s h values of 2 bytes
    n_allreduce = 4 * (80 // 8) * 48  # 4 per layer, 10 layers on the GPU, 48 micro-batches
    assert tr.layer.payload_bytes == payload == 100_663_296
    assert tr.payload_bytes == n_allreduce * payload
    assert tr.bytes_per_gpu == pytest.approx(n_allreduce * 2 * 7 / 8 * payload)  # 338.2 GB
    one = 2 * 7 / 8 * payload / 300e9 + 2 * 7 * 5e-6  # ring all-reduce on 8 GPUs, alpha = 5 us
    assert tr.time == pytest.approx(n_allreduce * one) == pytest.approx(1.2618, abs=1e-4)
    assert tr.share == pytest.approx(tr.time / est.iteration_time)


def test_bubble_follows_the_virtual_stages_of_every_row():
    for c in CONFIGS.values():
        est = memory.megatron_estimate(c, hardware=HW)
        p = c.pipeline_parallel
        v = c.layers // (p * c.layers_per_virtual_stage) if c.layers_per_virtual_stage else 1
        assert est.virtual_stages == v
        assert est.bubble == pytest.approx((p - 1) / (v * est.micro_batches + p - 1))
        assert est.bubble == pytest.approx(schedule.bubble_fraction(p, est.micro_batches, v))
    assert memory.megatron_estimate(CONFIGS["530B"], hardware=HW).virtual_stages == 3  # 105 / (35 x 1)
    assert memory.megatron_estimate(CONFIGS["18B"], hardware=HW).bubble == 0.0  # no pipeline


def test_tensor_traffic_zero_without_tensor_split_and_linear_in_latency():
    est = memory.megatron_estimate(CONFIGS["1.7B"], hardware=HW)  # t = 1
    tr = tensor_cost.megatron_tensor_traffic(est, NVLINK)
    assert (tr.bytes_per_gpu, tr.time) == (0.0, 0.0)
    one_t = memory.megatron_estimate(CONFIGS["1T"], hardware=HW)
    slow = tensor_cost.megatron_tensor_traffic(one_t, NVLINK, latency=1e-3)
    free = tensor_cost.megatron_tensor_traffic(one_t, NVLINK, latency=0.0)
    calls = 4 * (128 // 64) * 512
    assert slow.time - free.time == pytest.approx(calls * 2 * 7 * 1e-3)
    assert free.time == pytest.approx(free.bytes_per_gpu / NVLINK)
    default = tensor_cost.megatron_tensor_traffic(one_t, NVLINK)  # the course's alpha on NVLink
    assert default.time - free.time == pytest.approx(calls * 2 * 7 * alpha_beta.NVLINK_LATENCY)


def test_megatron_tensor_traffic_rejects_bad_input():
    est = memory.megatron_estimate(CONFIGS["1T"], hardware=HW)
    with pytest.raises(TypeError, match="estimate"):
        tensor_cost.megatron_tensor_traffic(CONFIGS["1T"], NVLINK)
    with pytest.raises(ValueError, match="bandwidth"):
        tensor_cost.megatron_tensor_traffic(est, 0.0)
    with pytest.raises(ValueError, match="latency"):
        tensor_cost.megatron_tensor_traffic(est, NVLINK, latency=-1.0)
    with pytest.raises((ValueError, TypeError), match="bandwidth"):
        tensor_cost.megatron_tensor_traffic(est, math.nan)
