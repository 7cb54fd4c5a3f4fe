"""Browser fixtures for end-to-end tests: Playwright driving the SYSTEM Chromium, never a downloaded one.

``browser`` (session) is shared by every e2e test that opens a page (the report, the web pages). Chromium is
installed by ``scripts/install-chromium.sh`` when missing; if that fails the tests fail (no skip).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = REPO_ROOT / "test-artifacts"

# Flags for a quiet, sandbox-free headless Chromium that reaches out to nothing on its own (no component
# updates, no background networking, no QUIC probes, no sync), so "zero network requests" measures the page.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-quic",
    "--no-first-run",
    "--disable-sync",
]


def _chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        subprocess.run(["bash", str(REPO_ROOT / "scripts" / "install-chromium.sh")], check=True)
        path = shutil.which("chromium")
    if path is None:
        raise RuntimeError("chromium is not on PATH after scripts/install-chromium.sh")
    return path


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    """Path of the system Chromium (installed on first use)."""
    return _chromium_path()


@pytest.fixture(scope="package")
def browser(chromium_executable: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Playwright ``Browser`` on the system Chromium, shared by the end-to-end tests.

    Package scope, not session: Playwright's sync API keeps an event loop marked as running in the main
    thread while it is started, which would break every later test that calls ``asyncio.run``.

    Playwright starts it with a new, empty profile (user data) directory of its own; downloads go to a temp
    dir. ``PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD`` makes sure nothing ever fetches a browser.
    """
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(
            executable_path=chromium_executable,
            headless=True,
            args=CHROMIUM_ARGS,
            downloads_path=str(tmp_path_factory.mktemp("downloads")),
        )
        try:
            yield b
        finally:
            b.close()
    finally:
        pw.stop()


@pytest.fixture
def artifacts_dir() -> Path:
    """``test-artifacts/`` at the repository root (gitignored): screenshots and other evidence."""
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS_DIR
