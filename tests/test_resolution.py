"""How finely numeric columns are coded (rdpgan.resolution): no finer than the per-class
marginals' noise allows, planned from released values only, and kept by a saved model."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from rdpgan import DPCGAN, measure
from rdpgan.config import PrivacyConfig
from rdpgan.data.discretize import GRID_LIMIT
from rdpgan.errors import UserInputError
from rdpgan.resolution import MIN_BINS, RESOLUTION_NOISE, numeric_resolution
from tests.test_synthesizer import SCHEMA, SMALL, toy_table

ONE_STEP = {**SMALL, "train": replace(SMALL["train"], steps=1)}


def test_precise_counts_keep_the_configured_resolution():
    assert numeric_resolution(40, 26_000, 2, 51.0) == (40, GRID_LIMIT)  # Adult at ε = 1
    assert numeric_resolution(40, 1_300, 3, 2.8) == (40, GRID_LIMIT)  # acs12 at ε = 8
    assert numeric_resolution(40, 1_300, 3, 0.0) == (40, GRID_LIMIT)  # exact statistics


def test_noisy_counts_halve_the_bins_and_cut_integer_columns_into_bins():
    # acs12 at ε = 1: 1,300 rows in 3 classes, noise std 18 a count: 27.8 codes a column.
    affordable = 1_300 / (RESOLUTION_NOISE * 18.0 * 3**0.5)
    assert 27 < affordable < 28
    assert numeric_resolution(40, 1_300, 3, 18.0) == (20, 27)
    # One row fewer per code: at the boundary of 40 bins.
    at_40 = 40 * RESOLUTION_NOISE * 18.0 * 3**0.5
    assert numeric_resolution(40, at_40, 3, 18.0) == (40, 40)
    assert numeric_resolution(40, at_40 - 1, 3, 18.0) == (20, 39)


def test_the_bins_stop_halving_at_the_floor_and_never_get_finer():
    assert numeric_resolution(40, 100, 2, 50.0) == (MIN_BINS, MIN_BINS)
    assert numeric_resolution(10, 10**6, 2, 1.0) == (10, GRID_LIMIT)
    assert numeric_resolution(200, 10**6, 2, 1.0) == (200, 200)
    assert numeric_resolution(1, 100, 2, 50.0) == (1, 1)  # (tune_adult's one-bin models)


def fitted(epsilon: float, rows: int) -> DPCGAN:
    """A default fit of the toy table's first ``rows`` rows, one training step."""
    model = DPCGAN(epsilon=epsilon, seed=0, device="cpu", **ONE_STEP)
    return model.fit(toy_table(rows), "y", SCHEMA)


@pytest.fixture(scope="module")
def coarse_model() -> DPCGAN:
    """A fit whose per-class marginals are too noisy for 40 bins and 100 integer codes: the
    toy table's 1,200 rows at ε = 0.5."""
    return fitted(0.5, 1200)


def resolution_of_recorded_noise(model: DPCGAN) -> tuple[int, int]:
    """:func:`numeric_resolution` at the noise the per-class tables were released with."""
    per_class = next(r for r in model.ledger.releases if r.name == measure.MARGINALS)
    noise = per_class.noise_multiplier * per_class.details["sensitivity"]
    return numeric_resolution(40, model.released_rows, 2, noise)


@pytest.mark.parametrize(("epsilon", "rows"), [(0.5, 1200), (0.7, 1000), (0.7, 3000), (1.0, 300)])
def test_a_fit_codes_numbers_at_the_resolution_its_releases_afford(epsilon, rows):
    """Planned before the densities and the marginals are drawn, at the noise the marginals
    are then released with: the plan counts the densities' release before them (at ε = 0.7,
    a plan without it moved the adaptive pairs' share to the marginals, which the release
    then did not, and coded 1,000 rows at (20, 37) for a noise that affords (20, 26))."""
    model = fitted(epsilon, rows)
    expected = resolution_of_recorded_noise(model)
    transformer = model.transformer
    assert (transformer.n_bins, transformer.grid_limit) == model.resolution == expected


def test_a_coarse_plan_cuts_integer_columns_into_bins_with_densities(coarse_model):
    bins, grid_limit = coarse_model.resolution
    assert bins < 40 and grid_limit < 100  # (the test's premise: a coarse plan)
    # n's 100 integers are cut into the bins, so their densities are released.
    assert "n" in coarse_model.transformer.wide_columns and "n" in coarse_model.densities
    assert coarse_model.transformer.bins["n"].n_values <= bins


def test_the_plan_reads_the_released_row_count_not_the_rows(monkeypatch):
    """Two tables of 1,200 and 600 rows whose label counts are released alike (the release
    patched to give the same vector) are coded alike: the plan sees no row, only releases."""
    release = measure.label_counts

    def released_alike(labels, n_classes, ledger, noise_multiplier, rng):
        release(labels, n_classes, ledger, noise_multiplier, rng)  # (recorded as it is)
        return np.array([600.0, 600.0])

    monkeypatch.setattr(measure, "label_counts", released_alike)
    plans = []
    for rows in (1200, 600):
        model = fitted(0.5, rows)
        transformer = model.transformer
        plans.append((model.resolution, transformer.wide_columns, transformer.code_sizes))
    assert plans[0] == plans[1]
    # (Else no test: at the smaller table's own row count the plan would differ.)
    per_class = next(r for r in model.ledger.releases if r.name == measure.MARGINALS)
    noise = per_class.noise_multiplier * per_class.details["sensitivity"]
    assert plans[0][0] != numeric_resolution(40, 600, 2, noise)


def test_a_saved_model_keeps_its_resolution(coarse_model, tmp_path):
    rows = coarse_model.sample(300, seed=4)
    coarse_model.save(tmp_path)
    again = DPCGAN.load(tmp_path, device="cpu")
    assert again.transformer.n_bins == coarse_model.transformer.n_bins
    assert again.transformer.grid_limit == coarse_model.transformer.grid_limit
    pd.testing.assert_frame_equal(again.sample(300, seed=4), rows)


def test_a_model_saved_before_the_resolution_was_planned_reads_as_configured(tmp_path):
    model = DPCGAN(epsilon=8.0, seed=0, device="cpu", **ONE_STEP).fit(toy_table(), "y", SCHEMA)
    assert model.resolution == (40, GRID_LIMIT)
    rows = model.sample(300, seed=4)
    model.save(tmp_path)
    meta = json.loads((tmp_path / "model.json").read_text())
    del meta["resolution"]
    meta["format"] = 5
    (tmp_path / "model.json").write_text(json.dumps(meta))
    old = DPCGAN.load(tmp_path, device="cpu")
    assert (old.transformer.n_bins, old.transformer.grid_limit) == (40, GRID_LIMIT)
    pd.testing.assert_frame_equal(old.sample(300, seed=4), rows)
    meta["format"] = 7  # (a format this version does not know)
    (tmp_path / "model.json").write_text(json.dumps(meta))
    with pytest.raises(UserInputError, match="unknown format version"):
        DPCGAN.load(tmp_path, device="cpu")


def test_without_privacy_the_configured_resolution():
    model = DPCGAN(epsilon=0.5, device="cpu", privacy=PrivacyConfig(accountant="none"), **ONE_STEP)
    model.fit(toy_table(), "y", SCHEMA)
    assert model.resolution == (40, GRID_LIMIT)
