"""The Megatron-LM reproduction with the pipeline bubble (virtual stages) and the tensor-parallel
all-reduces priced on NVLink: hand values for the 145B row of data/megatron_configs.csv."""

import math

import pytest

from course_lib import alpha_beta, megatron, planner, schedule
from course_lib.datasets import load_hardware, load_megatron_configs

HW = load_hardware()
CONFIGS = {c.model: c for c in load_megatron_configs()}
NVLINK = planner.device_parameters("a100_sxm_80gb")["bandwidth"]  # 600 GB/s both ways: 300 GB/s


def test_145b_row_by_hand():
    # 145B: 80 layers, h = 12288, t = 8, p = 8, 1536 GPUs, B = 2304, b = 2, 5 layers per virtual stage
    est = megatron.megatron_estimate(CONFIGS["145B"], hardware=HW)
    d = 1536 // (8 * 8)  # 24 replicas
    m = 2304 // (d * 2)  # 48 micro-batches
    v = 80 // (8 * 5)  # 2 chunks per GPU
    assert (est.data_parallel, est.micro_batches, est.virtual_stages) == (24, 48, 2) == (d, m, v)
    assert est.bubble == pytest.approx(7 / (2 * 48 + 7))  # (p - 1)/(v m + p - 1)
    assert est.bubble_time == pytest.approx(est.bubble * est.iteration_time)
    tr = megatron.megatron_tensor_traffic(est, NVLINK)
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
        est = megatron.megatron_estimate(c, hardware=HW)
        p = c.pipeline_parallel
        v = c.layers // (p * c.layers_per_virtual_stage) if c.layers_per_virtual_stage else 1
        assert est.virtual_stages == v
        assert est.bubble == pytest.approx((p - 1) / (v * est.micro_batches + p - 1))
        assert est.bubble == pytest.approx(schedule.bubble_fraction(p, est.micro_batches, v))
    assert megatron.megatron_estimate(CONFIGS["530B"], hardware=HW).virtual_stages == 3  # 105 / (35 x 1)
    assert megatron.megatron_estimate(CONFIGS["18B"], hardware=HW).bubble == 0.0  # no pipeline


def test_tensor_traffic_zero_without_tensor_split_and_linear_in_latency():
    est = megatron.megatron_estimate(CONFIGS["1.7B"], hardware=HW)  # t = 1
    tr = megatron.megatron_tensor_traffic(est, NVLINK)
    assert (tr.bytes_per_gpu, tr.time) == (0.0, 0.0)
    one_t = megatron.megatron_estimate(CONFIGS["1T"], hardware=HW)
    slow = megatron.megatron_tensor_traffic(one_t, NVLINK, latency=1e-3)
    free = megatron.megatron_tensor_traffic(one_t, NVLINK, latency=0.0)
    calls = 4 * (128 // 64) * 512
    assert slow.time - free.time == pytest.approx(calls * 2 * 7 * 1e-3)
    assert free.time == pytest.approx(free.bytes_per_gpu / NVLINK)
    default = megatron.megatron_tensor_traffic(one_t, NVLINK)  # the course's alpha on NVLink
    assert default.time - free.time == pytest.approx(calls * 2 * 7 * alpha_beta.NVLINK_LATENCY)


def test_megatron_tensor_traffic_rejects_bad_input():
    est = megatron.megatron_estimate(CONFIGS["1T"], hardware=HW)
    with pytest.raises(TypeError, match="estimate"):
        megatron.megatron_tensor_traffic(CONFIGS["1T"], NVLINK)
    with pytest.raises(ValueError, match="bandwidth"):
        megatron.megatron_tensor_traffic(est, 0.0)
    with pytest.raises(ValueError, match="latency"):
        megatron.megatron_tensor_traffic(est, NVLINK, latency=-1.0)
    with pytest.raises((ValueError, TypeError), match="bandwidth"):
        megatron.megatron_tensor_traffic(est, math.nan)


# ------------------------------------------------------------------ ZeRO-3 alone or 3D parallelism (issue 38, H3)
def test_the_network_of_megatron_lms_cluster():
    """Eight 200 Gbit/s HDR InfiniBand cards per DGX A100 of 8 GPUs: 200 GB/s each way, 25 GB/s per GPU."""
    assert megatron.network_bandwidth("a100_sxm_80gb", hardware=HW) == 8 * 200e9 / 8 / 8 == 25e9
    with pytest.raises(ValueError, match="node_network_gb_s"):
        megatron.network_bandwidth("h100_sxm", hardware=HW)


def test_zero3_alone_fits_the_trillion_parameter_model_but_its_traffic_does_not_fit_the_step():
    """The hand numbers of issue 38 (H3): ZeRO-3 over the 1T row's 3,072 GPUs holds 16 P / 3,072 = 5.25 GB
    of model states; one 2,048-token sequence with full recomputation adds 2sbh x 128 + one layer =
    18.6 GB: about 24 GB (plus one gathered layer and its gradient, 31.5 GB: 55 GB), which fits an
    A100 80GB. Each step it sends 3 (N-1)/N 2P = 6 TB per GPU: in one flat ring, whose slowest hop is a
    GPU's 25 GB/s share of the network, 242 s against 102.6 s of compute."""
    flat, two_level, hsdp, grid = megatron.sharding_comparison(CONFIGS["1T"], hardware=HW)
    p, n, sbh = 1_008_038_707_200, 3072, 2048 * 25600
    assert flat.states.total == pytest.approx(16 * p / n) and round(flat.states.total / 1e9, 2) == 5.25
    one_layer = sbh * (34 + 5 * 160 * 2048 / 25600)  # no tensor split: sbh (34 + 5as/h)
    assert flat.activations == pytest.approx(128 * 2 * sbh + one_layer) and round(flat.activations / 1e9, 1) == 18.6
    assert round((flat.states.total + flat.activations) / 1e9) == 24
    layer_params = 12 * 25600**2 + 13 * 25600
    assert flat.buffers == 2 * 2 * layer_params and round(flat.buffers / 1e9, 1) == 31.5
    assert flat.fits and flat.memory < flat.capacity == 80 * 2**30
    assert flat.sent_bytes == flat.network_bytes == pytest.approx(3 * (n - 1) / n * 2 * p)
    assert round(flat.sent_bytes / 1e12) == 6
    bandwidth_term = flat.network_bytes / 25e9
    assert round(bandwidth_term) == 242 and flat.network_time == pytest.approx(bandwidth_term + 3 * (n - 1) * 10e-6)
    assert round(flat.compute_time, 1) == 102.6 and flat.traffic_ratio > 2.3
    assert flat.min_batch == n == CONFIGS["1T"].batch_size  # one sequence per GPU: the paper's whole batch


def test_zero3_with_two_level_rings():
    """The same bytes per GPU, but a ring over the 384 servers carries 1/8 of them per GPU on the network
    (every card busy) and a ring inside each server the rest on NVLink (300 GB/s each way)."""
    flat, two_level, hsdp, grid = megatron.sharding_comparison(CONFIGS["1T"], hardware=HW)
    p, nodes = megatron.megatron_estimate(CONFIGS["1T"], hardware=HW).params, 3072 // 8
    assert two_level.states == flat.states and two_level.memory == flat.memory
    assert two_level.network_bytes == pytest.approx(3 * (nodes - 1) / nodes * 2 * p / 8)  # 754 GB
    assert two_level.nvlink_bytes == pytest.approx(3 * 7 / 8 * 2 * p)  # 5.3 TB
    assert two_level.network_time == pytest.approx(two_level.network_bytes / 25e9 + 3 * (nodes - 1) * 10e-6)
    assert two_level.nvlink_time == pytest.approx(two_level.nvlink_bytes / 300e9 + 3 * 7 * 5e-6)
    assert round(two_level.network_time, 1) == 30.2 and 0.4 < two_level.traffic_ratio < 0.5
    assert two_level.network_bytes > 30 * grid.network_bytes  # still dozens of times the grid's


def test_hybrid_sharding_and_the_3d_grid():
    """Hybrid sharding (ZeRO-3 inside a server of 8) sends an eighth of the gradient over the network but
    holds 16 P / 8 = 2 TB per GPU; the paper's 8 x 64 x 6 grid holds 46 GB and sends 20 GB."""
    flat, two_level, hsdp, grid = megatron.sharding_comparison(CONFIGS["1T"], hardware=HW)
    est = megatron.megatron_estimate(CONFIGS["1T"], hardware=HW)
    p, nodes = est.params, 3072 // 8
    assert hsdp.states.total == pytest.approx(16 * p / 8) and not hsdp.fits
    assert hsdp.network_bytes == pytest.approx(2 * (nodes - 1) / nodes * 2 * p / 8)  # 503 GB
    assert hsdp.nvlink_bytes == two_level.nvlink_bytes and hsdp.network_time < two_level.network_time
    assert hsdp.network_time < hsdp.compute_time < flat.network_time
    assert grid.states == est.states and grid.activations == est.activations_recompute and grid.fits
    dp = 2 * 5 / 6 * 2 * p / 512  # the all-reduce of a GPU's 1/512 of the 16-bit gradient over 6 replicas
    hand_over = 2 * 512 * 2 * 2048 * 25600 / 8  # 512 micro-batches, forward and back, split over N_t = 8
    assert grid.network_bytes == pytest.approx(dp + hand_over) and round(grid.network_bytes / 1e9) == 20
    assert grid.nvlink_bytes == megatron.megatron_tensor_traffic(est, NVLINK).bytes_per_gpu
    assert grid.traffic_ratio < 0.05 and grid.min_batch == 6
    assert grid.network_bytes < hsdp.network_bytes < two_level.network_bytes < flat.network_bytes


def test_selective_recomputation_on_the_first_stage():
    """The 1T row's first stage holds 64 micro-batches of 2 layers: with selective recomputation
    128 x sbh (10 + 24/8) = 87.2 GB + 31.5 GB of states: still too much for 80 GiB."""
    est = megatron.megatron_estimate(CONFIGS["1T"], hardware=HW)
    assert est.activations_selective == pytest.approx(128 * 2048 * 25600 * 13)
    assert est.activations_recompute < est.activations_selective < est.activations
    assert not est.fits_with_selective and est.fits_with_recompute
    # with sequence parallelism too, sbh 34/8 per layer (Korthikanti et al., Table 2): 28.5 GB + 31.5 GB fit
    assert est.activations_sequence_selective == pytest.approx(128 * 2048 * 25600 * 34 / 8)
    assert round((est.states.total + est.activations_sequence_selective) / 1e9, 1) == 60.0 < est.capacity / 1e9


def test_sharding_comparison_rejects_bad_input():
    with pytest.raises(TypeError, match="config"):
        megatron.sharding_comparison({"model": "1T"}, hardware=HW)
    with pytest.raises(TypeError, match="hardware"):
        megatron.sharding_comparison(CONFIGS["1T"], hardware="a100")
