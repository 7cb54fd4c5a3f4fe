"""The one path rule: every file a remote caller names resolves under the data roots, never the working
directory; relative, absolute, '..', symlink and percent-encoded forms of an outside file are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelbench.domain.run import RunSpec
from accelbench.errors import UserInputError
from accelbench.services.paths import confine, confine_spec, data_roots, resolve_file
from accelbench.settings import get_settings, reset_settings_cache

CAP = {"slo": {"ttft_ms": 500}}


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Only the service's own roots (no extra roots), a working directory holding a secret file beside it, and
    an outside directory with a secret."""
    monkeypatch.delenv("ACCELBENCH_API_PATH_ROOTS", raising=False)
    monkeypatch.setenv("ACCELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    reset_settings_cache()
    datasets = get_settings().datasets_dir
    datasets.mkdir(parents=True)
    get_settings().models_dir.mkdir(parents=True)
    (datasets / "prompts.jsonl").write_text('{"prompt": "hi"}\n')
    (datasets / "tok").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_text('{"prompt": "hunter2"}\n')
    (datasets / "link.jsonl").symlink_to(outside / "secret.jsonl")
    (datasets / "linkdir").symlink_to(outside)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "beside.jsonl").write_text('{"prompt": "hunter2"}\n')
    (cwd / "beside-model").mkdir()
    monkeypatch.chdir(cwd)
    yield {"datasets": datasets, "outside": outside, "cwd": cwd}
    reset_settings_cache()


def _outside_forms(r: dict[str, Path]) -> list[str]:
    secret = r["outside"] / "secret.jsonl"
    return [
        "beside.jsonl",  # relative: would have been read from the working directory
        str(secret),  # absolute
        str(r["cwd"] / "beside.jsonl"),
        "../outside/secret.jsonl",  # '..'
        str(r["datasets"] / ".." / ".." / "outside" / "secret.jsonl"),
        "link.jsonl",  # a symlink inside a root pointing out
        str(r["datasets"] / "link.jsonl"),
        "linkdir/secret.jsonl",
        "%2e%2e/outside/secret.jsonl",  # percent-encoded
        "..%2Foutside%2Fsecret.jsonl",
        "~/secret.jsonl",
        "prompts.jsonl\x00.txt",
        "no-such-file.jsonl",
    ]


def _spec(field: str, value: str) -> dict[str, Any]:
    """A run spec naming ``value`` in ``field`` (a dotted spec key)."""
    sweep_ds = {"dataset": "jsonl", "dataset_path": value}
    return {
        "sweep.dataset_path": {"model": "qwen2.5-0.5b", "sweep": sweep_ds},
        "sweep.trace": {"model": "qwen2.5-0.5b", "sweep": {"dataset": "trace", "dataset_path": value}},
        "sweep.tools": {"model": "qwen2.5-0.5b", "sweep": {"tools": value}},
        "capacity.dataset_path": {"model": "qwen2.5-0.5b", "capacity": {**CAP, **sweep_ds}},
        "capacity.tools": {"model": "qwen2.5-0.5b", "capacity": {**CAP, "tools": value}},
        "target.tokenizer": {
            "model": "qwen2.5-0.5b",
            "target": {"kind": "endpoint", "base_url": "http://127.0.0.1:9", "tokenizer": value},
        },
        "target.kubeconfig": {"model": "qwen2.5-0.5b", "target": {"kind": "kubernetes", "kubeconfig": value}},
        "model": {"model": value},
    }[field]


FIELDS = ["sweep.dataset_path", "sweep.trace", "sweep.tools", "capacity.dataset_path", "capacity.tools",
          "target.tokenizer", "target.kubeconfig", "model"]  # fmt: skip


@pytest.mark.parametrize("field", FIELDS)
def test_every_spec_key_naming_a_file_refuses_every_outside_form(roots: dict[str, Path], field: str) -> None:
    for value in _outside_forms(roots):
        if field == "model" and value in ("no-such-file.jsonl", "link.jsonl", "linkdir/secret.jsonl"):
            continue  # a model may be a name (a hub id): it stays one; the loader never reads it as a path
        spec = RunSpec.model_validate(_spec(field, value))
        with pytest.raises(UserInputError) as err:
            confine_spec(spec)
        message = str(err.value)
        assert str(roots["datasets"].resolve()) in message, (field, value, message)  # the roots are named
        assert "hunter2" not in message


@pytest.mark.parametrize("field", [f for f in FIELDS if f != "model"])
def test_a_name_under_a_root_is_handed_on_as_its_resolved_absolute_path(
    roots: dict[str, Path], field: str
) -> None:
    value = "tok" if field == "target.tokenizer" else "prompts.jsonl"
    spec = confine_spec(RunSpec.model_validate(_spec(field, value)))
    dumped = spec.model_dump(mode="json")
    expected = str((roots["datasets"] / value).resolve())
    assert expected in str(dumped), dumped
    # its absolute form is accepted too, and stays the same file
    again = confine_spec(RunSpec.model_validate(_spec(field, expected)))
    assert again.model_dump(mode="json") == dumped


def test_a_model_name_stays_a_name_and_a_model_beside_the_service_is_refused(roots: dict[str, Path]) -> None:
    assert confine("Qwen/Qwen2.5-7B-Instruct", "model") == "Qwen/Qwen2.5-7B-Instruct"
    assert confine("qwen2.5-0.5b", "model") == "qwen2.5-0.5b"
    with pytest.raises(UserInputError, match="beside the service"):
        confine("beside-model", "model")


def test_builtin_tools_and_absent_fields_pass_unchanged(roots: dict[str, Path]) -> None:
    spec = RunSpec.model_validate({"model": "qwen2.5-0.5b", "sweep": {"tools": "builtin"}})
    assert confine_spec(spec).sweep.tools == "builtin"
    assert confine_spec(RunSpec.model_validate({"model": "qwen2.5-0.5b"})).sweep.dataset_path is None


def test_extra_roots_come_from_the_settings(roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_API_PATH_ROOTS", f'["{roots["outside"]}"]')
    reset_settings_cache()
    assert roots["outside"].resolve() in data_roots()
    assert resolve_file("secret.jsonl", "sweep.dataset_path") == str(
        roots["outside"].resolve() / "secret.jsonl"
    )
    assert roots["cwd"].resolve() not in data_roots()  # never the working directory
