"""Shared fixtures: the real data directory (../shared/data or MARGINMINE_DATA_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    return Path(os.environ.get("MARGINMINE_DATA_DIR", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def real_data() -> Path:
    d = data_dir()
    if not (d / "paracrawl-human-eval-en-de").is_dir():
        pytest.skip(f"real data not found at {d} (set MARGINMINE_DATA_DIR)")
    return d


@pytest.fixture(scope="session")
def paracrawl_tsv(real_data: Path) -> Path:
    return real_data / "paracrawl-human-eval-en-de" / "paracrawl-v3-validation-data.sorted.en-de.tsv"
