"""The REST API under ``/api/v1`` (one router per resource), its authentication, error mapping and the
background run worker: a thin shell over ``accelbench.services``. ``accelbench.server.create_app`` mounts it
beside the web pages."""
