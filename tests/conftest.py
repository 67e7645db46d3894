"""Shared fixtures: where the real data lives, and small tables for fast tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data sets: $RDPGAN_DATA_DIR, else ../shared/data beside the checkout."""
    root = Path(os.environ.get("RDPGAN_DATA_DIR") or SHARED_DATA)
    if not (root / "adult" / "adult.data").is_file():
        pytest.fail(f"real data not found under {root}; set RDPGAN_DATA_DIR")
    return root
