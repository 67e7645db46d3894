"""Shared fixtures: where the real data lives, and small tables for fast tests."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def pytest_configure(config: pytest.Config) -> None:
    """One thread per xdist worker (and per CLI it starts): two workers that each run torch on
    every core oversubscribe the machine and run several times slower than one core each."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _fixed_global_rngs() -> None:
    """Each test starts from the same global RNG state, whichever tests its xdist worker ran
    before (the product's own DP noise does not come from these generators)."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data sets: $RDPGAN_DATA_DIR, else ../shared/data beside the checkout."""
    # Absolute: tests run the CLIs from temporary directories.
    root = Path(os.environ.get("RDPGAN_DATA_DIR") or SHARED_DATA).resolve()
    if not (root / "adult" / "adult.data").is_file():
        pytest.fail(f"real data not found under {root}; set RDPGAN_DATA_DIR")
    return root


FAST = [
    "train.epochs=2",
    "train.batch_size=200",
    "train.progress=false",
    "model.generator_hidden=[64]",
    "model.discriminator_hidden=[64]",
]


def run_cli(cli: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m rdpgan.<cli> <args>`` from ``cwd``, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", f"rdpgan.{cli}", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def train_cli(tmp_path: Path, *overrides: str, root: Path | None = None):
    env = {**os.environ}
    if root is not None:
        env["RDPGAN_DATA_DIR"] = str(root)
    return subprocess.run(
        [sys.executable, "-m", "rdpgan.train", f"hydra.run.dir={tmp_path / 'run'}", *overrides],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="session")
def small_adult(tmp_path_factory, data_dir) -> Path:
    """A data root holding the first 3,000 rows of the real adult.data."""
    root = tmp_path_factory.mktemp("adult_root")
    (root / "adult").mkdir()
    lines = (data_dir / "adult" / "adult.data").read_text().splitlines()[:3000]
    (root / "adult" / "adult.data").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, small_adult) -> Path:
    """One short real run (ε=3, evaluated) on the small Adult root, shared by several tests.

    It is tilted and rakes (tilt on and a pool of 4, named: its marginals are too noisy for the
    one and the default has none of the other), so that the sampling tests that use it cover
    both."""
    where = tmp_path_factory.mktemp("trained")
    result = train_cli(
        where,
        "dataset=adult",
        "epsilon=3",
        "seed=1",
        "privacy.noise_seed=1",
        "evaluate=true",
        "model.sample_pool=4",
        "model.tilt_sampling=true",
        *FAST,
        root=small_adult,
    )
    assert result.returncode == 0, result.stderr
    return where / "run"
