"""One router per API resource, all mounted under ``/api/v1`` by ``accelbench.api.app.create_app``."""
