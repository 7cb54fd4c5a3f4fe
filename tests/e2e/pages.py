"""Shared helpers of the page tests: a live server over a seeded SQLite store, a page that records console
errors and every request (each must stay on the server), and sign-in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.support.api_app import summary
from tests.support.live_server import LiveServer, live_server


@dataclass
class Tab:
    page: Any
    server: LiveServer
    console_errors: list[str] = field(default_factory=list)
    offsite: list[str] = field(default_factory=list)

    def goto(self, path: str) -> Any:
        return self.page.goto(self.server.url + path)

    def sign_in(self, next_path: str = "/") -> None:
        self.goto(f"/login?next={next_path}")
        self.page.fill("#token", self.server.token)
        self.page.click("#login-form button[type=submit]")
        self.page.wait_for_url(self.server.url + next_path)

    def assert_clean(self) -> None:
        assert self.console_errors == [], self.console_errors
        assert self.offsite == [], self.offsite


def open_tab(browser: Any, server: LiveServer) -> Tab:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    tab = Tab(page=page, server=server)
    page.on("console", lambda m: tab.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: tab.console_errors.append(str(e)))

    def route(r: Any) -> None:
        if r.request.url.startswith(server.url) or r.request.url.startswith("data:"):
            r.continue_()
        else:
            tab.offsite.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return tab


def seed(store: Store) -> dict[str, str]:
    """A completed CPU sweep with telemetry, a completed GPU run, a failed one and a pending one."""
    env = {"cpu": {"model": "Test CPU 9000", "arch": "x86_64", "physical_cores": 2, "logical_cpus": 2,
                   "isa": {"present": ["AVX2", "AVX512-BF16"], "has": {"AMX": False, "AVX512-BF16": True}}},
           "memory": {"total_gib": 24}}  # fmt: skip
    cpu = store.create_run(kind="run", label="cpu-sweep", model="smollm2-135m-instruct", engine="vllm-cpu",
                           engine_version="0.32.0", target="local", accelerator_type="cpu", environment=env,
                           spec={"engine": {"settings": {"kv_cache_space_gib": 1, "max_model_len": 2048}}})  # fmt: skip
    for il in (128, 512):
        for c in (1, 2, 4):
            store.save_result(cpu.id, input_len=il, concurrency=c, repeat=0,
                              summary=summary(il, c, tpot=25.0 + 3 * c + il / 128))  # fmt: skip
    store.set_status(cpu.id, RunStatus.completed)
    gpu = store.create_run(kind="run", label="gpu-l4", model="smollm2-135m-instruct", engine="vllm",
                           instance_type="g6.2xlarge", accelerator_type="gpu", accelerator_name="L4",
                           accelerator_count=1, target="kubernetes")  # fmt: skip
    for il in (128, 512):
        for c in (1, 2, 4):
            store.save_result(gpu.id, input_len=il, concurrency=c, repeat=0,
                              summary=summary(il, c, tpot=8.0 + c))  # fmt: skip
    store.set_status(gpu.id, RunStatus.completed)
    failed = store.create_run(kind="run", label="broken", model="qwen2.5-7b-instruct", engine="vllm-cpu",
                              instance_type="m8i.2xlarge", accelerator_type="cpu", target="kubernetes")  # fmt: skip
    store.set_status(failed.id, RunStatus.failed, error="Engine exited: out of memory")
    pending = store.create_run(kind="run", label="waiting", model="smollm2-135m-instruct", engine="vllm-cpu",
                               accelerator_type="cpu", target="local")  # fmt: skip
    return {"cpu": cpu.id, "gpu": gpu.id, "failed": failed.id, "pending": pending.id}


@pytest.fixture
def sqlite_store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'pages.db'}")


@pytest.fixture
def server(sqlite_store: Store) -> Iterator[LiveServer]:
    with live_server(sqlite_store) as s:
        yield s


@pytest.fixture
def tab(browser: Any, server: LiveServer) -> Iterator[Tab]:
    t = open_tab(browser, server)
    yield t
    t.page.context.close()
