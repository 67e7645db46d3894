"""The budget split a fit plans before any draw (rdpgan.adaptive.moves_to_marginals), on a
stand-in for a fitted model: it reads only the settings, the public encoding, the released
row count and the ledger."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from rdpgan import adaptive, measure, sampler
from rdpgan.config import ModelConfig, PrivacyConfig
from rdpgan.data.discretize import table_sizes
from rdpgan.data.schema import Schema
from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.transform import TableTransformer

SCHEMA = Schema.from_specs(
    [
        {"name": "x", "kind": "continuous", "lo": -5, "hi": 5},
        {"name": "n", "kind": "continuous", "lo": 0, "hi": 100, "integer": True},
        {"name": "c", "kind": "categorical", "levels": ["a", "b", "c"], "missing": True},
        {"name": "y", "kind": "categorical", "levels": [0, 1]},
    ]
)
TRANSFORMER = TableTransformer(SCHEMA, "y")
SIZES = table_sizes(TRANSFORMER.features, measure.PAIR_BINS)


def stand_in(epsilon: float, rows: int, privacy: PrivacyConfig | None = None) -> SimpleNamespace:
    """What a fit holds when it plans the split: the label counts released, nothing else."""
    ledger = PrivacyLedger(epsilon, 1e-5, "rdp")
    ledger.record(Release("label_counts", "gaussian", 10.0, 1.0, 1, {"sensitivity": 1.0}))
    return SimpleNamespace(
        privacy=privacy or PrivacyConfig(),
        ledger=ledger,
        transformer=TRANSFORMER,
        released_rows=rows,
        model_config=ModelConfig(),
    )


def planned_noise(model: SimpleNamespace, fraction: float) -> float:
    """The marginals' planned noise at ``fraction``, pairs decided at the configured share
    and the tilt's noise limit (as a fit releases them)."""
    privacy = model.privacy
    releases = measure.planned_marginal_releases(
        table_sizes(model.transformer.features, measure.PAIR_BINS),
        model.released_rows,
        model.ledger,
        fraction,
        privacy.selection_fraction,
        privacy.marginals_fraction,
        sampler.TILT_NOISE_LIMIT,
    )
    return measure.largest_noise(releases)


def test_the_released_row_count_decides_whether_sampling_would_rake(monkeypatch):
    """The same noise against two released row counts either side of raking's limit."""
    model = stand_in(8.0, 10_000)
    noise = planned_noise(model, model.privacy.marginals_fraction)
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", noise / 10_000)
    # Rakes: the share stays for the pairs.
    assert not adaptive.moves_to_marginals(model, model.transformer.features)
    model.released_rows = 9_990  # (the same pairs are candidates: the same noise)
    assert planned_noise(model, model.privacy.marginals_fraction) == noise
    assert adaptive.moves_to_marginals(model, model.transformer.features)


def test_the_share_moves_only_while_dp_sgd_keeps_what_the_shares_leave_it(monkeypatch):
    """The moved marginals' planned epsilon against (every share) x target, either side."""
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 0.0)  # never rakes
    model = stand_in(0.7, 10_000)  # (the label counts' fixed noise: much of a small budget)
    privacy = model.privacy
    moved = measure.planned_marginal_releases(
        SIZES,
        10_000,
        model.ledger,
        privacy.marginals_fraction + privacy.adaptive_fraction,
        privacy.selection_fraction,
    )
    spent = model.ledger.epsilon_with(moved, best_order=True) / 0.7
    others = privacy.marginals_fraction + privacy.selection_fraction + privacy.adaptive_fraction
    assert others < spent < 1  # the threshold falls inside the range the densities can set
    for density_share, moves in ((spent - others - 1e-3, False), (spent - others + 1e-3, True)):
        model.privacy = PrivacyConfig(numeric_density_fraction=density_share)
        assert adaptive.moves_to_marginals(model, model.transformer.features) == moves


@pytest.mark.parametrize("epsilon", [1.0, 2.0, 8.0])
def test_moving_the_share_never_makes_a_released_count_noisier(epsilon, monkeypatch):
    """Over released row counts where the larger share makes more pairs affordable (on seven
    columns, up to twice as many pairs as columns but one: the pair release's noise, spread
    over more tables, can outgrow what a small added share buys) and where it does not, it
    moves only where no count gets noisier."""
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 0.0)
    # (Pairs kept however noisy: the tilt's limit would drop them from every plan noisy enough
    # to meet the guard, which is tested here on its own.)
    monkeypatch.setattr(sampler, "TILT_NOISE_LIMIT", math.inf)
    privacy = PrivacyConfig(adaptive_fraction=0.02)
    larger = privacy.marginals_fraction + privacy.adaptive_fraction
    levels = [2, 3, 4, 6, 8, 12, 16]
    names = [f"c{i}" for i in range(len(levels))]
    specs = [
        {"name": name, "kind": "categorical", "levels": list(range(k))}
        for name, k in zip(names, levels, strict=True)
    ]
    wide = TableTransformer(
        Schema.from_specs([*specs, {"name": "y", "kind": "categorical", "levels": [0, 1]}]), "y"
    )
    noisier, moves = [], []
    for rows in range(20, 6000, 20):
        model = stand_in(epsilon, rows, privacy)
        model.transformer = wide
        before = planned_noise(model, privacy.marginals_fraction)
        after = planned_noise(model, larger)
        noisier.append(after > before)
        moves.append(adaptive.moves_to_marginals(model, model.transformer.features))
        if moves[-1]:
            assert after <= before
    assert any(noisier) and not all(noisier)  # both cases were met
    assert any(moves)
