"""The service: a FastAPI application (REST API under ``/api/v1``, the web pages) and its background run
worker, a thin shell over the same functions the CLI calls. ``create_app`` builds it; ``accelbench serve``
serves it."""

from accelbench.api.app import create_app

__all__ = ["create_app"]
