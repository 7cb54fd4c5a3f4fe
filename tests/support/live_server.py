"""A real HTTP server (uvicorn in a thread, on a free port) over ``create_app``, for browser tests and the
load benchmark: the pages are fetched over TCP exactly as a user's browser fetches them."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn

from accelbench.server.app import create_app
from accelbench.settings import Settings
from accelbench.store import Store


@dataclass
class LiveServer:
    url: str
    token: str
    store: Store
    app: Any

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@contextmanager
def live_server(
    store: Store,
    *,
    token: str = "live-token",
    start_worker: bool = False,
    executor: Callable[..., Any] | None = None,
    read_auth: bool = False,
    worker_options: dict[str, float] | None = None,
) -> Iterator[LiveServer]:
    settings = Settings(api_token=token, api_read_auth=read_auth, database_url=store.url)
    app = create_app(settings, store, start_worker=start_worker, executor=executor)
    if app.state.worker is not None:
        for key, value in {"poll_interval_s": 0.2, "heartbeat_s": 1.0, **(worker_options or {})}.items():
            setattr(app.state.worker, key, value)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(url=f"http://127.0.0.1:{port}", token=token, store=store, app=app)
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()
