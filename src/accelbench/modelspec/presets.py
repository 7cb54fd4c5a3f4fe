"""Shipped model presets: the published ``config.json`` of well-known models, one JSON file each.

A preset file holds ``name``, ``hf_id``, ``aliases``, ``source`` (where the config was published) and
``config`` (the config.json fields as published). Names match case-insensitively; the hub id is an alias.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from accelbench.domain.model import ModelSource, ModelSpec
from accelbench.modelspec.hf_config import spec_from_config

PRESET_SCHEMA_VERSION = 1


@lru_cache(maxsize=1)
def _presets() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    folder = resources.files("accelbench.modelspec") / "presets"
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".json"):
            continue
        doc = json.loads(entry.read_text())
        if doc.get("schema_version") != PRESET_SCHEMA_VERSION:
            raise RuntimeError(f"preset {entry.name}: unsupported schema_version {doc.get('schema_version')}")
        out[doc["name"]] = doc
    return out


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    index: dict[str, str] = {}
    for name, doc in _presets().items():
        for key in [name, doc.get("hf_id") or "", *doc.get("aliases", [])]:
            if key:
                index[key.lower()] = name
                index[key.lower().rsplit("/", 1)[-1]] = name
    return index


def preset_names() -> list[str]:
    return sorted(_presets())


def resolve_preset(ref: str) -> str | None:
    """The preset name ``ref`` means (name, alias or hub id, any case), or None."""
    return _index().get(ref.strip().lower())


def preset_document(name: str) -> dict[str, Any]:
    return _presets()[name]


def all_preset_keys() -> list[str]:
    """Every name and alias, for did-you-mean suggestions."""
    return sorted(set(_index()))


@lru_cache(maxsize=64)
def load_preset(name: str) -> ModelSpec:
    doc = _presets()[name]
    return spec_from_config(
        doc["config"], name=name, source=ModelSource.preset, ref=name, hf_id=doc.get("hf_id")
    )
