"""The free self-check: gaps of sampled rows from the releases, in noise stds, and the sampling
variant it chooses."""

from __future__ import annotations

import numpy as np
import pytest

from rdpgan import sampler
from rdpgan.marginals import MARGINALS, PAIR_MARGINALS, Marginals
from rdpgan.selfcheck import LOUD_GAP, NoiseStds, loud_line, overall, release_gaps

ROWS = 20_000
LABEL_PROBS = np.array([0.6, 0.4])


def released_marginals() -> Marginals:
    """Two columns of 3 and 4 codes, their per-class shares, and their one released pair."""
    first = np.array([[0.5, 0.3, 0.2], [0.1, 0.3, 0.6]])
    second = np.array([[0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]])
    joint = sum(p * np.outer(first[c], second[c]) for c, p in enumerate(LABEL_PROBS))
    maps = [np.arange(3), np.arange(4)]
    return Marginals([first, second], [(0, 1)], [joint], maps)


def rows_from(marginals: Marginals, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose columns follow the released per-class shares, independently."""
    labels = rng.choice(2, ROWS, p=LABEL_PROBS)
    codes = np.empty((ROWS, 2), np.int64)
    for column, table in enumerate(marginals.by_class):
        for c in range(2):
            rows = labels == c
            codes[rows, column] = rng.choice(table.shape[1], rows.sum(), p=table[c])
    return codes, labels


def gaps_of(codes: np.ndarray, labels: np.ndarray, noise: float = 20.0):
    marginals = released_marginals()
    stds = NoiseStds(noise, noise, noise)
    return release_gaps(marginals, stds, LABEL_PROBS, ROWS, codes, labels, ["a", "b"])


def test_rows_that_follow_the_releases_sit_within_their_noise():
    rng = np.random.default_rng(0)
    gaps = gaps_of(*rows_from(released_marginals(), rng))
    assert [g.release for g in gaps] == [MARGINALS, PAIR_MARGINALS]
    assert [g.cells for g in gaps] == [2 * 3 + 2 * 4, 12]
    assert all(g.rms < 1.5 and g.worst < 3.5 for g in gaps)
    assert loud_line(gaps) is None


def test_rows_off_a_release_are_measured_in_its_noise_and_said_so():
    """Column a of class 1 moved by 0.1 of its share: 0.1 * 8,000 rows = 800 rows, 40 stds of
    a count noise of 20, and a loud line that names where."""
    rng = np.random.default_rng(0)
    codes, labels = rows_from(released_marginals(), rng)
    moved = np.flatnonzero((labels == 1) & (codes[:, 0] == 2))[:800]
    codes[moved, 0] = 0
    gaps = gaps_of(codes, labels)
    per_class = gaps[0]
    assert per_class.where == "a in class 1" and per_class.worst > LOUD_GAP
    # In a larger noise the same rows sit fewer stds off, in proportion.
    quieter = gaps_of(codes, labels, noise=200.0)[0]
    assert quieter.worst < per_class.worst / 5
    line = loud_line(gaps)
    assert line is not None and "a in class 1" in line
    assert overall(gaps) > overall(gaps_of(*rows_from(released_marginals(), rng)))


def test_a_row_in_a_cell_an_exact_release_left_empty_is_one_std_not_millions():
    """A non-private run releases exact shares, with cells at 0: the rows' own spread is read
    as no narrower than one row, so one synthetic row there is about one std off (the worst
    cell is then one of sampling's few), and 50 are loud."""
    marginals = released_marginals()
    marginals.by_class[0][0] = [0.7, 0.3, 0.0]  # class 0 never has code 2 of column a
    exact = NoiseStds(0.0, 0.0, 0.0)
    rng = np.random.default_rng(0)
    codes, labels = rows_from(marginals, rng)

    def worst_with(rows_in_the_empty_cell: int) -> tuple[float, str]:
        moved = codes.copy()
        moved[np.flatnonzero(labels == 0)[:rows_in_the_empty_cell], 0] = 2
        gaps = release_gaps(marginals, exact, LABEL_PROBS, ROWS, moved, labels, ["a", "b"])
        return gaps[0].worst, gaps[0].where

    assert worst_with(1)[0] < 4.0
    worst, where = worst_with(50)
    assert worst > LOUD_GAP and where == "a in class 0"


def test_sampling_takes_the_variant_closer_to_the_releases_and_keeps_the_choice(monkeypatch):
    """Where raking may rake, chosen_pool samples both ways once and keeps the pool whose rows
    sit closer to the releases (raking on a tie); an explicit sample_pool is never second
    guessed, and where raking may not rake nothing is measured."""
    asked: list[int] = []
    distance = {sampler.RAKING_POOL: 2.0, 1: 1.0}

    def measured(self, pool, workers=1):
        asked.append(pool)
        return distance[pool]

    monkeypatch.setattr(sampler.Sampler, "release_distance", measured)
    monkeypatch.setattr(
        sampler.Sampler, "raking_pool", lambda self: self.config.sample_pool or sampler.RAKING_POOL
    )
    config = type("Config", (), {"sample_pool": None})()
    tilts = sampler.Tilts()
    stub = sampler.Sampler(
        None, None, LABEL_PROBS, ROWS, released_marginals(), 1.0, config, 0, tilts
    )
    assert stub.chosen_pool() == 1 and sorted(asked) == [1, sampler.RAKING_POOL]
    asked.clear()
    assert stub.chosen_pool() == 1 and asked == []  # chosen once
    tilts.clear()
    distance[1] = 2.0
    assert stub.chosen_pool() == sampler.RAKING_POOL  # a tie rakes
    config.sample_pool = 4
    asked.clear()
    assert stub.chosen_pool() == 4 and asked == []
    config.sample_pool = None
    monkeypatch.setattr(sampler.Sampler, "raking_pool", lambda self: 1)
    assert stub.chosen_pool() == 1 and asked == []


@pytest.mark.parametrize("ledger_noise", [None, 3.0])
def test_each_release_is_measured_in_its_own_noise(ledger_noise):
    from rdpgan.privacy.ledger import PrivacyLedger, Release

    if ledger_noise is None:
        stds = NoiseStds.from_ledger(None, 7.0)
        assert stds == NoiseStds(7.0, 7.0, 7.0)
        return
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    ledger.record(Release(MARGINALS, "gaussian", 2.0, 1.0, 1, {"sensitivity": 1.5}))
    ledger.record(Release(PAIR_MARGINALS, "gaussian", ledger_noise, 1.0, 1, {"sensitivity": 2.0}))
    assert NoiseStds.from_ledger(ledger, 7.0) == NoiseStds(3.0, 2 * ledger_noise, 7.0)
