"""The catalog: instance types, accelerator specs and prices, shipped as versioned data files.

Use :func:`get_catalog` for the shared, validated catalog and :func:`price_for` for the best known price.
"""

from accelbench.catalog.loader import (
    SCHEMA_VERSION,
    Catalog,
    CatalogDataError,
    build_catalog,
    get_catalog,
    load_catalog,
    reset_catalog_cache,
    serving_memory_gib,
)
from accelbench.catalog.pricing import (
    PricingUnavailableError,
    RefreshReport,
    price_for,
    price_map,
    prices_for,
    refresh_prices,
    snapshot_price,
)

__all__ = [
    "SCHEMA_VERSION",
    "Catalog",
    "CatalogDataError",
    "PricingUnavailableError",
    "RefreshReport",
    "build_catalog",
    "get_catalog",
    "load_catalog",
    "price_for",
    "price_map",
    "prices_for",
    "refresh_prices",
    "reset_catalog_cache",
    "serving_memory_gib",
    "snapshot_price",
]
