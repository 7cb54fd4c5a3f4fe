"""Process-wide settings, read from the environment with the prefix ``ACCELBENCH_``.

Every setting can also be given as a CLI flag where it makes sense; the flag wins.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

APP_NAME = "accelbench"


class Settings(BaseSettings):
    """Settings shared by the CLI, the API and the workers."""

    model_config = SettingsConfigDict(env_prefix="ACCELBENCH_", extra="ignore")

    data_dir: Path = Field(
        default_factory=lambda: Path(platformdirs.user_data_dir(APP_NAME)),
        description="Where the default SQLite store and run artefacts live.",
    )
    cache_dir: Path = Field(
        default_factory=lambda: Path(platformdirs.user_cache_dir(APP_NAME)),
        description="Where engines (virtual environments) and prepared models live; shared by every run.",
    )
    api_path_roots: list[Path] = Field(
        default_factory=list,
        description="More directories whose files API and page callers may name (a model, a dataset, a "
        "tokenizer), besides the models and datasets directories; JSON list, e.g. '[\"/srv/models\"]'.",
    )
    allowed_targets: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="When set, the only servers the service reaches for a caller: host names or CIDRs, comma "
        "separated or a JSON list (e.g. '10.0.0.0/8,engine.internal'). Unset: any address but link-local, "
        "cloud metadata and the service's own.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the results store; default: SQLite file under the data dir. "
        "PostgreSQL: postgresql+psycopg://user:pass@host:port/db",
    )
    api_token: str | None = Field(
        default=None,
        description="Bearer token that mutating API endpoints require (in addition to stored API keys).",
    )
    api_read_auth: bool = Field(
        default=True,
        description="Read endpoints of the API and the pages need a token as well (the default); false opts "
        "in to public reads, secrets still masked.",
    )
    worker: bool = Field(default=True, description="Run the background run worker inside `accelbench serve`.")
    worker_max_runs: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Most runs the worker executes at once: it takes another only while every run it executes "
        "waits for a remote engine to become ready; one run at a time measures on this machine.",
    )

    @field_validator("allowed_targets", mode="before")
    @classmethod
    def _split_targets(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            return (
                json.loads(text)
                if text.startswith("[")
                else [v.strip() for v in text.split(",") if v.strip()]
            )
        return value

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'accelbench.db'}"

    @property
    def engines_dir(self) -> Path:
        return self.cache_dir / "engines"

    @property
    def models_dir(self) -> Path:
        return self.cache_dir / "models"

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def datasets_dir(self) -> Path:
        """Where dataset files a run may name live (the only place API callers may name one from)."""
        return self.data_dir / "datasets"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def reset_settings_cache() -> None:
    """Forget cached settings (tests change the environment between cases)."""
    get_settings.cache_clear()
