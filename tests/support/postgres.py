"""Start a throw-away PostgreSQL server for the test session (the server binaries are on the machine).

PostgreSQL refuses to run as root, so when the tests run as root the server runs as the ``postgres`` user.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


def _find_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for base in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (base / name).exists():
            return str(base / name)
    raise RuntimeError(f"PostgreSQL's {name} is not installed; install the postgresql package.")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    root: Path
    port: int
    _as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        subprocess.run(
            [*self._as_user, _find_bin("pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def start_postgres() -> PostgresServer:
    root = Path(tempfile.mkdtemp(prefix="accelbench-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run(
        [
            *as_user,
            _find_bin("initdb"),
            "-D",
            str(root / "data"),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
    )
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    proc = subprocess.run(
        [
            *as_user,
            _find_bin("pg_ctl"),
            "-D",
            str(root / "data"),
            "-o",
            opts,
            "-l",
            str(root / "log"),
            "-w",
            "start",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {proc.stderr}\n{log[-2000:]}")
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.1)
    return PostgresServer(root=root, port=port, _as_user=as_user)
