"""``load_model_spec(ref)``: one function for every way a user names a model.

Lookup order, first match wins:
1. an existing path: a ``.gguf`` file, a ``config.json`` file, or a directory holding ``config.json`` (or a
   single ``.gguf`` file);
2. a hub id (``org/name``) present in the Hugging Face cache (offline; carries the real checkpoint size);
3. a shipped preset, by name, alias or hub id, any case;
4. a model prepared by ``accelbench model prepare`` (a directory under the cache dir's ``models/``);
5. a hub id fetched from the hub (config only, short timeout, only when the network is allowed).
Anything else is an error that suggests the closest preset names.
"""

from __future__ import annotations

from pathlib import Path

from accelbench.domain.model import ModelSource, ModelSpec
from accelbench.errors import NotFoundError, UserInputError
from accelbench.modelspec import hub, presets
from accelbench.modelspec.gguf_file import spec_from_gguf
from accelbench.modelspec.hf_config import spec_from_config
from accelbench.registry import did_you_mean
from accelbench.settings import get_settings


def spec_from_dir(path: Path, *, ref: str, source: ModelSource, hf_id: str | None = None) -> ModelSpec:
    """A spec from a model directory (config.json and its metadata files)."""
    if not (path / "config.json").is_file():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return spec_from_gguf(ggufs[0], ref=ref)
        if len(ggufs) > 1:
            raise UserInputError(
                f"{path} holds {len(ggufs)} GGUF files and no config.json.",
                hint="Name the .gguf file itself: " + ", ".join(p.name for p in ggufs[:5]),
            )
    info = hub.read_model_dir(path)
    revision = None
    if source == ModelSource.hf_cache and path.parent.name == "snapshots":
        revision = path.name
    name = hf_id or path.name
    if not hf_id and path.name in ("hf", "model", "checkpoint") and path.parent.name:
        name = path.parent.name  # a prepared model's hf/ directory is named by its parent
    return spec_from_config(
        info.config,
        name=name,
        source=source,
        ref=ref,
        hf_id=hf_id,
        revision=revision,
        facts=info.facts,
    )


def _prepared_dir(ref: str) -> Path | None:
    """A prepared model's directory: ``<cache>/models/<name>/`` holds ``hf/`` (the BF16 directory vLLM
    serves) and/or ``gguf/<file>.gguf`` (what llama.cpp serves); the ``hf/`` one describes the model best."""

    root = get_settings().models_dir
    for candidate in (root / ref, root / ref.replace("/", "--"), root / ref.lower()):
        try:
            if not candidate.is_dir():
                continue
            for sub in (candidate / "hf", candidate, candidate / "gguf"):
                if (sub / "config.json").is_file() or (sub.is_dir() and len(list(sub.glob("*.gguf"))) == 1):
                    return sub
        except OSError:  # a name too long for the file system is not a prepared model
            continue
    return None


def _prepared_names() -> list[str]:

    root = get_settings().models_dir
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def _as_path(ref: str) -> Path | None:
    """The existing file or directory ``ref`` names, else None. A name the OS cannot even stat (too long,
    an unknown ``~user``) is a name, not a path, so it falls through to the preset lookup."""
    try:
        path = Path(ref).expanduser()
        return path if path.exists() else None
    except (OSError, RuntimeError, ValueError):
        return None


def load_model_spec(ref: str, *, revision: str | None = None, allow_network: bool = True) -> ModelSpec:
    """Read the spec of the model ``ref`` names (see the module docstring for the lookup order)."""
    ref = (ref or "").strip()
    if not ref:
        raise UserInputError(
            "No model given.", hint="Pass a preset name, a directory, a .gguf file or a hub id."
        )
    path = _as_path(ref)
    if path is not None:
        if path.is_file():
            if path.suffix.lower() == ".gguf":
                return spec_from_gguf(path, ref=ref)
            if path.name == "config.json":
                return spec_from_dir(path.parent, ref=ref, source=ModelSource.config_dir)
            raise UserInputError(
                f"{ref} is a file but neither a .gguf file nor a config.json.",
                hint="Point at the model directory, its config.json or a .gguf file.",
            )
        return spec_from_dir(path, ref=ref, source=ModelSource.config_dir)
    is_repo = hub.looks_like_repo_id(ref)
    if is_repo:
        cached = hub.find_in_hf_cache(ref, revision)
        if cached is not None:
            return spec_from_dir(cached, ref=ref, source=ModelSource.hf_cache, hf_id=ref)
    preset = presets.resolve_preset(ref)
    if preset is not None:
        return presets.load_preset(preset)
    prepared = _prepared_dir(ref)
    if prepared is not None:
        return spec_from_dir(prepared, ref=ref, source=ModelSource.prepared)
    if is_repo and allow_network:
        fetched = hub.fetch_from_hub(ref, revision)
        spec = spec_from_dir(fetched, ref=ref, source=ModelSource.hub, hf_id=ref)
        return spec.model_copy(update={"revision": revision or "main"})
    if ref.startswith((".", "/", "~")) or ref.endswith((".gguf", ".json")):
        raise NotFoundError(f"No such file or directory: {ref}.")
    err = did_you_mean(ref, presets.all_preset_keys() + _prepared_names(), "model")
    hint = "Presets: " + ", ".join(presets.preset_names())
    hint += ". Or give a directory with config.json, a .gguf file, or a hub id like org/name."
    raise NotFoundError(err.message, hint=hint)
