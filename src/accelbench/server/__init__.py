"""The HTTP service assembled: the REST API (``accelbench.api``), the web pages (``accelbench.web``) and the run
worker's lifecycle in one FastAPI application. ``create_app`` builds it; ``accelbench serve`` runs it.

It sits above both shells so that the pages may use the API's helpers (authentication, redaction) while the
API knows nothing of the pages.
"""

from accelbench.server.app import create_app

__all__ = ["create_app"]
