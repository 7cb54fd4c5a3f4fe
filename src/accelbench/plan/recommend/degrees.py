"""The tensor-parallel degrees each tier can run a model at on an instance: GPUs dividing the attention and KV
heads, Neuron's power-of-two degrees (>= 2 for grouped KV heads) and the whole instance, a CPU's one rank per
NUMA node on a number of nodes that divides the heads. What the goal weighs (``plan/choose.py``) and what a
refused size is told to use instead."""

from __future__ import annotations

from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.plan.recommend.cpu import cpu_tp_degrees
from accelbench.plan.recommend.gpu import valid_gpu_tps
from accelbench.plan.recommend.neuron import whole_instance_tp_ok
from accelbench.plan.recommend.tier_steps import pow2_upto


def tp_degrees(model: ModelSpec, instance: InstanceType, spec: AcceleratorSpec) -> list[int]:
    """The tensor-parallel degrees the tier can run on this instance, smallest first."""
    kind = instance.accelerator_type
    if kind == AcceleratorType.gpu:
        return valid_gpu_tps(model, instance.accelerator_count)
    if kind == AcceleratorType.neuron:
        units = instance.accelerator_count * (spec.neuron_logical_cores or spec.neuron_cores or 2)
        pow2 = {
            t
            for t in pow2_upto(units)
            if model.num_attention_heads % t == 0 and (t >= 2 or model.num_kv_heads == 1)
        }
        return sorted(pow2 | ({units} if whole_instance_tp_ok(model, units) else set()))
    return cpu_tp_degrees(model, instance.numa_nodes)
