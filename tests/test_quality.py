"""The quality report: quality.md's numbers are the fidelity scores, its figures are PNGs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from rdpgan.data.schema import Categorical, Continuous, Schema
from rdpgan.fidelity import fidelity_scores, per_column_tvd
from rdpgan.io import read_json
from rdpgan.quality import (
    ASSOCIATIONS_FIGURE,
    COLUMNS_FIGURE,
    HEADLINE,
    REPORT,
    TOP_LEVELS,
    code_labels,
    markdown,
    score_quality,
    write_quality,
)
from tests.conftest import run_cli

COUNTRIES = tuple(f"country-{i}" for i in range(25))
SCHEMA = Schema(
    [
        Continuous("age", 17, 90, integer=True),
        Continuous("gain", 0, 99999, integer=True, transform="log1p", point_masses=(0.0,)),
        Continuous("score", 0.0, 1.0, missing=True),
        Categorical("country", COUNTRIES, missing=True),
        Categorical("y", ("no", "yes")),
    ]
)


def table(n: int, seed: int, shift: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    score = rng.beta(2 + 3 * shift, 2, n)
    score[rng.uniform(size=n) < 0.1] = np.nan
    frame = pd.DataFrame(
        {
            "age": rng.integers(17, 60 + int(30 * shift), n),
            "gain": np.where(rng.uniform(size=n) < 0.8, 0, rng.integers(1, 20000, n)),
            "score": score,
            "country": rng.choice([*COUNTRIES[:12], None], n, p=[0.52, *[0.04] * 12]),
            "y": np.where(rng.uniform(size=n) < 0.3 + 0.2 * shift, "yes", "no"),
        }
    )
    return SCHEMA.conform(frame)


@pytest.fixture(scope="module")
def tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    return table(600, 0), table(150, 1), table(500, 2, shift=1.0)


@pytest.fixture(scope="module")
def written(tmp_path_factory, tables) -> Path:
    """A directory holding one quality report of ``tables`` (drawing takes seconds)."""
    out = tmp_path_factory.mktemp("quality")
    write_quality(out, *tables, SCHEMA, "y")
    return out


def headline_row(scores: dict) -> str:
    return " | ".join(f"{scores[key]:{spec}}" for key, (_, spec) in HEADLINE.items())


def test_quality_md_shows_the_fidelity_scores_and_the_floor(written, tables):
    train, held_out, synthetic = tables
    text = (written / REPORT).read_text()
    synthetic_scores = fidelity_scores(train, synthetic, SCHEMA, "y")
    floor = fidelity_scores(train, held_out, SCHEMA, "y")
    assert f"| synthetic | 500 | {headline_row(synthetic_scores)} |" in text
    assert f"| **held-out real rows (floor)** | 150 | {headline_row(floor)} |" in text
    assert "| synthetic, random rows as many as held-out | 150 |" in text
    assert "Not for publication" in text and "real training rows" in text
    assert f"![columns]({COLUMNS_FIGURE})" in text
    assert f"![associations]({ASSOCIATIONS_FIGURE})" in text
    # The per-column table: every column once, worst first, with the floor beside it.
    row = r"^\| ([\w-]+) \| (?:numeric|categorical) \| ([\d.]+) \| ([\d.]+) \|$"
    rows = re.findall(row, text, re.MULTILINE)
    tvd, floor_tvd = (
        per_column_tvd(train, synthetic, SCHEMA),
        per_column_tvd(train, held_out, SCHEMA),
    )
    assert [name for name, _, _ in rows] == sorted(SCHEMA.names, key=lambda c: -tvd[c])
    for name, mine, floors in rows:
        assert (mine, floors) == (f"{tvd[name]:.4f}", f"{floor_tvd[name]:.4f}")
    assert synthetic_scores["tvd_1way"] > floor["tvd_1way"]  # the shifted table is worse


def test_the_figures_are_readable_pngs_and_nothing_half_written_is_left(written):
    for name in (COLUMNS_FIGURE, ASSOCIATIONS_FIGURE):
        path = written / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width, _ = imread(path).shape
        assert height > 300 and width > 600
    assert sorted(p.name for p in written.iterdir()) == sorted(
        [REPORT, COLUMNS_FIGURE, ASSOCIATIONS_FIGURE]
    )


def test_without_more_synthetic_rows_than_held_out_there_is_no_size_matched_row(tables):
    train, held_out, synthetic = tables
    quality = score_quality(train, held_out, synthetic.iloc[:100], SCHEMA, "y")
    assert quality.synthetic_matched is None
    text = markdown(quality, SCHEMA, {"train": 600, "held_out": 150, "synthetic": 100})
    assert "as many as held-out" not in text and "| synthetic | 100 |" in text


def test_code_labels_name_values_bins_point_masses_and_missing():
    assert code_labels(SCHEMA["age"], 100)[:3] == ["17", "18", "19"]
    gain = code_labels(SCHEMA["gain"], 20)
    assert len(gain) == 21 and gain[0] == "0" and gain[-1] == "=0"
    assert gain[10] == f"{np.expm1(np.log1p(99999) / 2):.3g}"  # equal width in log space
    assert code_labels(SCHEMA["score"], 4) == ["0", "0.25", "0.5", "0.75", "missing"]
    assert code_labels(SCHEMA["country"], 20) == [*COUNTRIES, "missing"]
    assert len(COUNTRIES) > TOP_LEVELS  # the fixture exercises the "other" bar


def test_the_report_cli_writes_the_quality_report_of_a_run(trained_run: Path, small_adult: Path):
    env = {**os.environ, "RDPGAN_DATA_DIR": str(small_adult), "OMP_NUM_THREADS": "1"}
    result = run_cli("report", [f"run_dir={trained_run}"], trained_run.parent, env)
    assert result.returncode == 0, result.stderr
    assert "quality.md" in result.stdout
    text = (trained_run / REPORT).read_text()
    evaluation = read_json(trained_run / "evaluation.json")  # written by evaluate=true
    held_out = len((trained_run / "test.csv").read_text().splitlines()) - 1
    assert f"{headline_row(evaluation['fidelity'])} |" in text
    assert (
        f"| **held-out real rows (floor)** | {held_out} | "
        f"{headline_row(evaluation['fidelity_floor'])}" in text
    )
    for name in ("report.md", COLUMNS_FIGURE, ASSOCIATIONS_FIGURE):
        assert (trained_run / name).stat().st_size > 1000
