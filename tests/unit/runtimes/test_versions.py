"""Tool versions: defaults, stored values with audit, environment overrides reported as such."""

from __future__ import annotations

import pytest

from accelbench.errors import NotFoundError, UserInputError
from accelbench.runtimes import get_runtime
from accelbench.runtimes.versions import (
    effective_tool_versions,
    env_var_for,
    parse_assignments,
    set_tool_version,
    tool_defaults,
    tool_versions_table,
)
from accelbench.store.repo import Store


def test_defaults_cover_every_runtime_and_loadgen() -> None:
    d = tool_defaults()
    for key in ("vllm", "vllm-cpu", "vllm-neuron", "sglang", "loadgen"):
        assert d[key]
    assert d["vllm-cpu"] == get_runtime("vllm-cpu").default_version


def test_env_var_names() -> None:
    assert env_var_for("vllm") == "ACCELBENCH_TOOL_VLLM"
    assert env_var_for("vllm-cpu") == "ACCELBENCH_TOOL_VLLM_CPU"


def test_precedence_env_over_store_over_default() -> None:
    env = {"ACCELBENCH_TOOL_VLLM": "0.33.0", "VLLM_CPU_IMAGE": "mirror/cpu:x"}
    rows = {r.key: r for r in tool_versions_table({"vllm": "0.31.0", "sglang": "0.5.20"}, env)}
    assert (rows["vllm"].value, rows["vllm"].source, rows["vllm"].stored) == ("0.33.0", "env", "0.31.0")
    assert (rows["sglang"].value, rows["sglang"].source) == ("0.5.20", "store")
    assert rows["vllm-cpu"].source == "default"
    assert rows["vllm-cpu"].image_override == "mirror/cpu:x"
    assert rows["vllm-cpu"].image_env_var == "VLLM_CPU_IMAGE"


def test_set_audit_and_empty_keeps(store: Store) -> None:
    assert set_tool_version(store, "vllm-cpu", "0.31.0", actor="alice") is True
    assert set_tool_version(store, "vllm-cpu", "", actor="alice") is False  # empty keeps the current one
    assert set_tool_version(store, "vllm-cpu", "0.31.0") is False  # unchanged: no audit line
    assert set_tool_version(store, "vllm-cpu", "0.32.0", actor="bob") is True
    assert effective_tool_versions(store, environ={})["vllm-cpu"] == "0.32.0"
    log = store.audit_log()
    assert [(e["key"], e["old_value"], e["new_value"], e["actor"]) for e in log] == [
        ("vllm-cpu", "0.31.0", "0.32.0", "bob"),
        ("vllm-cpu", None, "0.31.0", "alice"),
    ]
    # the runtime reads the stored CPU version, independent of the GPU one
    assert get_runtime("vllm-cpu").resolve_version(effective_tool_versions(store, environ={})) == "0.32.0"


def test_bad_keys_and_values(store: Store) -> None:
    with pytest.raises(NotFoundError, match="Did you mean 'vllm-cpu'"):
        set_tool_version(store, "vllm_cpu", "1")
    with pytest.raises(UserInputError, match="not a version"):
        set_tool_version(store, "vllm", "0.3 ; rm -rf")
    with pytest.raises(UserInputError, match="KEY=VALUE"):
        parse_assignments(["vllm"])
    assert parse_assignments(["vllm=0.33.0", "sglang="]) == [("vllm", "0.33.0"), ("sglang", "")]
