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
from rdpgan.fidelity import Cells, fidelity_scores, per_column_tvd
from rdpgan.io import read_json
from rdpgan.quality import (
    ASSOCIATIONS_FIGURE,
    COLUMNS_FIGURE,
    HEADLINE,
    REPORT,
    TOP_LEVELS,
    cell_labels,
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


def test_quality_md_shows_the_fidelity_scores_and_the_floor_at_both_resolutions(written, tables):
    train, held_out, synthetic = tables
    text = (written / REPORT).read_text()
    quantile_at = text.index("### At the data's resolution")
    public_at = text.index("### At the public bins")
    for resolution, section in (
        ("quantile", text[quantile_at:public_at]),
        ("public", text[public_at : text.index("## Columns")]),
    ):
        synthetic_scores = fidelity_scores(train, synthetic, SCHEMA, "y", resolution=resolution)
        floor = fidelity_scores(train, held_out, SCHEMA, "y", resolution=resolution)
        assert f"| synthetic | 500 | {headline_row(synthetic_scores)} |" in section
        assert f"| **held-out real rows (floor)** | 150 | {headline_row(floor)} |" in section
        assert "| synthetic, random rows as many as held-out | 150 |" in section
        assert synthetic_scores["tvd_1way"] > floor["tvd_1way"]  # the shifted table is worse
    assert "Not for publication" in text and "real training rows" in text
    assert f"![columns]({COLUMNS_FIGURE})" in text
    assert f"![associations]({ASSOCIATIONS_FIGURE})" in text
    # The per-column table: every column once, worst first at the data's resolution, with the
    # floor beside it, then both at the public bins.
    number = r" \| ([\d.]+)"
    row = rf"^\| ([\w-]+) \| (?:numeric|categorical){number * 4} \|$"
    rows = re.findall(row, text, re.MULTILINE)
    tvds = [
        per_column_tvd(train, rows, SCHEMA, resolution=resolution)
        for resolution in ("quantile", "public")
        for rows in (synthetic, held_out)
    ]
    assert [name for name, *_ in rows] == sorted(SCHEMA.names, key=lambda c: -tvds[0][c])
    for name, *shown in rows:
        assert shown == [f"{tvd[name]:.4f}" for tvd in tvds]


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
    assert quality.quantile.synthetic_matched is None and quality.public.synthetic_matched is None
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


def test_cell_labels_at_the_data_resolution_are_the_quantile_cells_lower_edges(tables):
    train = tables[0]
    cells = Cells.build("quantile", SCHEMA, train)
    score = cell_labels(cells, SCHEMA["score"])
    lower = cells.quantiles["score"].lower
    assert len(score) == cells.sizes[2] == 21 and score[-1] == "missing"
    assert score[:3] == [f"{v:.3g}" for v in lower[:3]]
    assert float(score[0]) == pytest.approx(train["score"].min(), rel=1e-2)  # the first edge
    assert cell_labels(cells, SCHEMA["gain"])[-1] == "=0"  # the point mass keeps its cell
    assert cell_labels(cells, SCHEMA["country"]) == code_labels(SCHEMA["country"], 20)
    public = Cells.build("public", SCHEMA, train)
    assert cell_labels(public, SCHEMA["gain"]) == code_labels(SCHEMA["gain"], 20)


def test_the_report_cli_writes_the_quality_report_of_a_run(trained_run: Path, small_adult: Path):
    env = {**os.environ, "RDPGAN_DATA_DIR": str(small_adult), "OMP_NUM_THREADS": "1"}
    result = run_cli("report", [f"run_dir={trained_run}"], trained_run.parent, env)
    assert result.returncode == 0, result.stderr
    assert "quality.md" in result.stdout
    text = (trained_run / REPORT).read_text()
    evaluation = read_json(trained_run / "evaluation.json")  # written by evaluate=true
    held_out = len((trained_run / "test.csv").read_text().splitlines()) - 1
    for key in ("fidelity", "fidelity_quantile"):
        assert f"{headline_row(evaluation[key])} |" in text
        assert (
            f"| **held-out real rows (floor)** | {held_out} | "
            f"{headline_row(evaluation[f'{key}_floor'])}" in text
        )
    for name in ("report.md", COLUMNS_FIGURE, ASSOCIATIONS_FIGURE):
        assert (trained_run / name).stat().st_size > 1000
