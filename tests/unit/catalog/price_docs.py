"""Builders for AWS Price List product documents (the ``aws_v1`` JSON that ``GetProducts`` returns)."""

from __future__ import annotations

import json
from typing import Any


def product_doc(
    instance_type: str,
    region: str = "us-east-1",
    *,
    on_demand: float | None = 1.0,
    reserved: list[tuple[str, str, str, float, float]] | None = None,
    operation: str = "RunInstances",
    sku: str = "SKU1",
) -> dict[str, Any]:
    """One product with an on-demand term and reserved terms given as
    (length "1yr"/"3yr", offering class, purchase option, upfront USD, hourly USD)."""
    terms: dict[str, Any] = {}
    if on_demand is not None:
        terms["OnDemand"] = {
            f"{sku}.JRTCKXETXF": {
                "offerTermCode": "JRTCKXETXF",
                "sku": sku,
                "effectiveDate": "2025-06-01T00:00:00Z",
                "termAttributes": {},
                "priceDimensions": {
                    f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                        "unit": "Hrs",
                        "description": f"${on_demand} per On Demand Linux {instance_type} Instance Hour",
                        "pricePerUnit": {"USD": f"{on_demand:.10f}"},
                    }
                },
            }
        }
    res: dict[str, Any] = {}
    for i, (length, klass, option, upfront, hourly) in enumerate(reserved or []):
        dims: dict[str, Any] = {
            f"{sku}.R{i}.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": f"{hourly:.10f}"}},
        }
        if upfront:
            dims[f"{sku}.R{i}.2TG2D8R56U"] = {"unit": "Quantity", "pricePerUnit": {"USD": f"{upfront}"}}
        res[f"{sku}.R{i}"] = {
            "offerTermCode": f"R{i}",
            "sku": sku,
            "termAttributes": {
                "LeaseContractLength": length,
                "OfferingClass": klass,
                "PurchaseOption": option,
            },
            "priceDimensions": dims,
        }
    if res:
        terms["Reserved"] = res
    return {
        "product": {
            "productFamily": "Compute Instance",
            "sku": sku,
            "attributes": {
                "instanceType": instance_type,
                "regionCode": region,
                "operatingSystem": "Linux",
                "tenancy": "Shared",
                "preInstalledSw": "NA",
                "capacitystatus": "Used",
                "operation": operation,
                "licenseModel": "No License required",
                "marketoption": "OnDemand",
            },
        },
        "serviceCode": "AmazonEC2",
        "terms": terms,
    }


def as_price_list(*docs: dict[str, Any]) -> list[str]:
    return [json.dumps(d) for d in docs]
