"""The shipped data set of published measurements (plan/data/public_measurements.yaml) and its loader."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import yaml

from accelbench.catalog import get_catalog
from accelbench.modelspec import load_model_spec
from accelbench.modelspec.presets import preset_names
from accelbench.plan.public_data import (
    KINDS,
    PublicDataError,
    PublicDataSet,
    by_kind,
    load_public_measurements,
    parse_public_measurements,
)


@pytest.fixture(scope="module")
def ds() -> PublicDataSet:
    return load_public_measurements()


def _raw() -> dict[str, Any]:
    from importlib import resources

    text = (resources.files("accelbench.plan") / "data" / "public_measurements.yaml").read_text()
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


def test_loads_and_is_cached(ds: PublicDataSet) -> None:
    assert ds.schema_version == 1
    assert load_public_measurements() is ds
    assert len(ds.measurements) >= 60
    assert len(ds.sources) >= 8


def test_every_row_names_a_source_with_a_url(ds: PublicDataSet) -> None:
    for row in ds.measurements:
        src = ds.sources[row.source]
        assert src.url.startswith(("https://", "http://")), row.id
        assert src.title and src.publisher and src.engine, row.source
        assert row.quote.strip(), row.id


def test_ids_unique(ds: PublicDataSet) -> None:
    ids = [r.id for r in ds.measurements]
    assert len(ids) == len(set(ids))


def test_every_row_is_usable(ds: PublicDataSet) -> None:
    for row in ds.measurements:
        assert row.accelerator and row.model and row.precision and row.engine, row.id
        if row.lengths in ("fixed", "random"):
            assert row.input_len and row.output_len, row.id
        else:
            assert row.dataset, row.id
        level = {"concurrency": row.concurrency, "request_rate": row.request_rate, "batch": row.batch}[
            row.load
        ]
        assert level is not None and level > 0, row.id
        assert row.load_level == float(level)
        assert row.metrics(), row.id
        for name, value in row.metrics().items():
            assert math.isfinite(value) and value > 0, (row.id, name)


def test_accelerators_and_kinds_match_the_catalog(ds: PublicDataSet) -> None:
    catalog = get_catalog()
    for row in ds.measurements:
        assert row.accelerator in catalog.accelerators, (row.id, row.accelerator)
        assert catalog.accelerators[row.accelerator].kind.value == row.kind, row.id


def test_catalog_instances_exist_and_hold_the_units(ds: PublicDataSet) -> None:
    catalog = get_catalog()
    for row in ds.measurements:
        if row.catalog_instance is None:
            assert row.doubts, f"{row.id}: no catalog instance and no doubt saying why"
            continue
        assert row.catalog_instance in catalog, (row.id, row.catalog_instance)
        inst = catalog.instance(row.catalog_instance)
        assert inst.accelerator_name == row.accelerator, (row.id, inst.name, inst.accelerator_name)
        if row.units is None:
            continue
        spec = catalog.accelerators[row.accelerator]
        if row.kind == "gpu":
            capacity = inst.accelerator_count
        elif row.kind == "neuron":
            capacity = inst.accelerator_count * (spec.neuron_logical_cores or spec.neuron_cores or 1)
        else:
            capacity = inst.vcpus
        assert row.units <= capacity, (row.id, row.units, inst.name, capacity)
        if row.tensor_parallel_size is not None:
            assert row.tensor_parallel_size <= row.units, row.id


def test_preset_models_load(ds: PublicDataSet) -> None:
    presets = set(preset_names())
    used = {r.model for r in ds.measurements if r.model in presets}
    assert used, "expected some rows on preset models"
    for name in sorted(used):
        spec = load_model_spec(name, allow_network=False)
        assert spec.name == name


def test_by_kind_covers_every_row(ds: PublicDataSet) -> None:
    groups = by_kind(ds)
    assert set(groups) == set(KINDS)
    assert sum(len(v) for v in groups.values()) == len(ds.measurements)
    for kind in KINDS:
        assert groups[kind], f"no {kind} rows"
        assert all(r.kind == kind for r in groups[kind])


def test_breadth(ds: PublicDataSet) -> None:
    accels = {r.accelerator for r in ds.measurements}
    assert {"H100-SXM", "A100-80GB", "H200", "Inferentia2", "Trainium"} <= accels
    assert any(r.tensor_parallel_size and r.tensor_parallel_size > 1 for r in ds.measurements)
    assert any(r.precision not in ("bf16", "fp16") for r in ds.measurements)
    conc = {r.concurrency for r in ds.measurements if r.load == "concurrency"}
    assert min(c for c in conc if c) == 1 and max(c for c in conc if c) >= 100


def _bad(mutate: Any) -> dict[str, Any]:
    doc = copy.deepcopy(_raw())
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d["measurements"].append(dict(d["measurements"][0])), "duplicate measurement id"),
        (lambda d: d["measurements"][0].update(source="nowhere"), "unknown source"),
        (
            lambda d: d["measurements"][0].update(load="concurrency", concurrency=None),
            "concurrency is not given",
        ),
        (lambda d: d["measurements"][0].update(lengths="fixed", input_len=None), "needs input_len"),
        (
            lambda d: d["measurements"][0].update(
                ttft_ms=None,
                tpot_ms=None,
                itl_ms=None,
                e2e_ms=None,
                output_tokens_per_s=None,
                requests_per_s=None,
            ),
            "no metric",
        ),
        (lambda d: d["measurements"][0].update(concurency=8), "Extra inputs"),
        (lambda d: d.update(schema_version=2), "schema_version"),
    ],
)
def test_malformed_documents_are_rejected(mutate: Any, needle: str) -> None:
    with pytest.raises(PublicDataError, match=needle):
        parse_public_measurements(_bad(mutate))
