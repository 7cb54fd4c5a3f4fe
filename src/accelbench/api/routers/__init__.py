"""One router per API resource, all mounted under ``/api/v1`` by ``accelbench.server.app.create_app``."""
