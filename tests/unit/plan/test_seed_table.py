"""The seed's own table: Qwen2.5-7B-Instruct BF16, max-model-len 4096, vLLM CPU on an m8i.2xlarge-class guest
with a 4 GiB KV space and vLLM on g6.2xlarge, input 128 and 512, concurrency 1/4/8, output 128.

The measured numbers per cell are not written down anywhere this project can read (SEED-SYSTEM-FACTS.md
lists none). What is known: the planner's predictions before the CPU topology was modelled put every CPU
row's TPOT at about twice the measurement and the GPU rows within 7% of it. The reference values below are
rebuilt from those statements and the predictions of that time (listed), and say so; replace them with the
measured table when it is available.

The seed measured an 8-vCPU m8i.2xlarge-class guest on a single-socket 32-core Xeon 6 host. Read as the catalog
lists an m8i.2xlarge (4 cores x 2 threads), vLLM's CPU backend binds 3 OpenMP threads, one per core, and keeps one
CPU for its scheduler process; each bound core reads at the catalog's per-core figure, derived by Little's law
(48 L2 misses in flight x 64 B / an approximate 125 ns loaded latency = 24.6 GB/s on Xeon 6). That per-core
figure is a rate a core reaches, so the model no longer scales it by the STREAM share of peak a second time
(``cpu_peak_gbps``): with it the catalog reading is 11-24% above the rebuilt values (it read 54-66% above when the
per-core rate was scaled twice). Described as 8 cores of one thread each on an idle host (``cores=8, smt=1``),
7 threads on 7 physical cores would decode about twice as fast, 41-47% below the rebuilt values: the seed's
vCPUs were not 8 idle physical cores. The band and the rebuilt values are unchanged; nothing was fitted to them.
"""

from __future__ import annotations

import pytest

from accelbench.domain.estimate import Estimate
from accelbench.domain.plan_query import EstimateQuery
from accelbench.modelspec import load_model_spec
from accelbench.plan.query import answer

MODEL = "qwen2.5-7b-instruct"
CELLS = [(128, 1), (128, 4), (128, 8), (512, 1), (512, 4), (512, 8)]
# TPOT (ms) predicted per cell before the topology was modelled, with the catalog's 4-core reading
OLD_CPU_TPOT = {
    (128, 1): 379.4,
    (128, 4): 381.4,
    (128, 8): 384.0,
    (512, 1): 380.1,
    (512, 4): 384.2,
    (512, 8): 436.6,
}
OLD_GPU_TPOT = {
    (128, 1): 60.5,
    (128, 4): 60.7,
    (128, 8): 60.9,
    (512, 1): 60.6,
    (512, 4): 61.0,
    (512, 8): 67.8,
}
# the issue: "every CPU row predicts TPOT about twice the measured value"
SEED_CPU_TPOT = {cell: tpot / 2 for cell, tpot in OLD_CPU_TPOT.items()}
# the issue: "the GPU rows are within 7%"; 8% more keeps a prediction within 15% of the measurement
GPU_DRIFT = 0.08
CPU_TOLERANCE = 0.30


def _estimate(instance: str, engine: str, input_len: int, concurrency: int, **extra: int) -> Estimate:
    query = EstimateQuery(
        model=MODEL,
        instance_type=instance,
        quantization="none",
        min_context=4096,
        engine=engine,
        no_calibration=True,
        input_len=input_len,
        output_len=128,
        concurrency=concurrency,
        **extra,
    )
    result = answer(query, load_model_spec(MODEL))
    assert isinstance(result, Estimate) and result.feasible and result.tpot_ms is not None
    return result


@pytest.mark.parametrize(("input_len", "concurrency"), CELLS)
def test_cpu_tpot_within_30_percent_of_the_seed_table(input_len: int, concurrency: int) -> None:
    e = _estimate("m8i.2xlarge", "vllm-cpu", input_len, concurrency, kv_cache_space_gib=4)
    measured = SEED_CPU_TPOT[(input_len, concurrency)]
    assert e.tpot_ms is not None
    assert abs(e.tpot_ms - measured) / measured <= CPU_TOLERANCE, (e.tpot_ms, measured)
    assert (
        e.topology is not None and "as the catalog lists it" in e.topology and "binds 3 threads" in e.topology
    )


@pytest.mark.parametrize(("input_len", "concurrency"), CELLS)
def test_gpu_tpot_stays_within_15_percent(input_len: int, concurrency: int) -> None:
    e = _estimate("g6.2xlarge", "vllm", input_len, concurrency)
    old = OLD_GPU_TPOT[(input_len, concurrency)]
    assert e.tpot_ms is not None
    assert abs(e.tpot_ms - old) / old <= GPU_DRIFT, (e.tpot_ms, old)
    assert e.topology is None


def test_catalog_topology_is_said_and_binds_one_thread_per_core() -> None:
    e = _estimate("m8i.2xlarge", "vllm-cpu", 128, 1, kv_cache_space_gib=4)
    assert e.topology is not None
    assert "as the catalog lists it" in e.topology and "4 cores x 2 threads" in e.topology
    # vLLM's automatic binding: one logical CPU per core, less one kept for its scheduler process
    assert "binds 3 threads, one per core, and keeps 1 CPU for its scheduler process" in e.topology
    guest = _estimate("m8i.2xlarge", "vllm-cpu", 128, 1, kv_cache_space_gib=4, cores=8, smt=1)
    # 7 cores pulling memory instead of 3: decode (bandwidth-bound) takes about 3/7 of the time, plus the
    # engine's fixed per-step cost
    assert e.tpot_ms is not None and guest.tpot_ms is not None
    assert 3 / 7 < guest.tpot_ms / e.tpot_ms < 0.5


def test_threads_on_smt_siblings_add_no_bandwidth() -> None:
    cores = _estimate("m8i.2xlarge", "vllm-cpu", 128, 1, kv_cache_space_gib=4, threads=4)
    siblings = _estimate("m8i.2xlarge", "vllm-cpu", 128, 1, kv_cache_space_gib=4, threads=8)
    assert cores.tpot_ms == pytest.approx(siblings.tpot_ms, rel=0.02)
    assert siblings.topology is not None and "4 on SMT siblings" in siblings.topology
    half = _estimate("m8i.2xlarge", "vllm-cpu", 128, 1, kv_cache_space_gib=4, threads=2)
    # 2 cores pull 2 x 24.6 = 49 GB/s; 4 are held to the 71 GB/s an m8i.2xlarge reads with every vCPU
    # (catalog, measured): decode (bandwidth-bound) takes about 71/49 as long on 2, plus the fixed step cost
    assert half.tpot_ms is not None and cores.tpot_ms is not None and half.tpot_ms > 1.3 * cores.tpot_ms


def test_a_described_guest_must_be_one_cpu_instance_of_the_same_vcpus() -> None:
    from accelbench.errors import UserInputError

    spec = load_model_spec(MODEL)
    with pytest.raises(UserInputError, match="give --instance"):
        answer(EstimateQuery(model=MODEL, cores=8), spec)
    with pytest.raises(UserInputError, match="CPU guest"):
        answer(EstimateQuery(model=MODEL, instance_type="g6.2xlarge", cores=8), spec)
    with pytest.raises(UserInputError, match="does not divide"):
        answer(EstimateQuery(model=MODEL, instance_type="m8i.2xlarge", cores=3), spec)
    with pytest.raises(UserInputError, match="is 16 vCPUs"):
        answer(EstimateQuery(model=MODEL, instance_type="m8i.2xlarge", cores=8, smt=2), spec)
