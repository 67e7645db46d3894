"""The marginal releases: which pairs may be measured, the consistency step, the wiring."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rdpgan import measure
from rdpgan.data.schema import Schema
from rdpgan.privacy.ledger import PrivacyLedger
from rdpgan.transform import TableTransformer


def test_a_small_epsilon_keeps_only_the_pairs_whose_tables_are_not_mostly_noise():
    sizes = [2, 7, 16, 16]  # cells per pair: 14, 32, 32, 112, 112, 256
    big = measure.pair_candidates(sizes, 20_000, PrivacyLedger(8.0, 1e-5, "rdp"), 1.9)
    small = measure.pair_candidates(sizes, 2_000, PrivacyLedger(1.0, 1e-5, "rdp"), 0.2375)
    assert len(big) == 6
    assert small == [(0, 1)]  # 14 cells; not 32, 112 or 256
    assert measure.pair_candidates(sizes, 20_000, PrivacyLedger(8.0, 1e-5, "none"), 0) == big
    tiny = measure.pair_candidates(sizes, 50, PrivacyLedger(1.0, 1e-5, "rdp"), 0.2375)
    assert tiny == []


def test_forest_size_counts_the_edges_a_selection_can_make():
    assert measure.forest_size(4, [(0, 1), (1, 2), (0, 2)]) == 2  # a triangle: one is a cycle
    assert measure.forest_size(4, [(0, 1), (2, 3)]) == 2
    assert measure.forest_size(3, []) == 0


def test_consistent_table_sums_to_one_and_zeroes_small_noisy_cells():
    noisy = np.array([[500.0, -3.0, 2.0], [4.0, 300.0, -1.0]])
    table = measure.consistent_table(noisy, 800.0)
    assert table.sum() == pytest.approx(1.0) and (table >= 0).all()
    assert table[0, 1] == 0 and table[1, 2] == 0
    assert table[0, 0] > 0.6  # the big cells keep their mass


SCHEMA = Schema.from_specs(
    [
        {"name": "a", "kind": "categorical", "levels": ["x", "y", "z"]},
        {"name": "b", "kind": "continuous", "lo": 0, "hi": 10, "integer": True},
        {"name": "c", "kind": "categorical", "levels": ["p", "q"]},
        {"name": "y", "kind": "categorical", "levels": [0, 1]},
    ]
)


def test_release_marginals_records_every_release_and_finds_a_copied_column():
    rng = np.random.default_rng(0)
    n = 3000
    a = rng.integers(0, 3, size=n)
    frame = pd.DataFrame(
        {
            "a": np.array(["x", "y", "z"])[a],
            "b": a * 3 + rng.integers(0, 2, size=n),  # b follows a closely
            "c": rng.choice(["p", "q"], size=n),
            "y": rng.integers(0, 2, size=n),
        }
    )
    transformer = TableTransformer(SCHEMA, "y")
    frame = SCHEMA.conform(frame)
    features, labels = transformer.encode(frame), transformer.encode_labels(frame)
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    released = measure.release_marginals(
        features, labels, transformer, np.array([0.5, 0.5]), n, ledger, 0.5, 0.05, rng
    )
    assert [r.name for r in ledger.releases] == ["marginals", "pair_selection", "pair_marginals"]
    assert ledger.epsilon() <= 8.0
    assert (0, 1) in released.pairs  # the strongest dependence is chosen first
    (joint,) = [t for p, t in zip(released.pairs, released.joint, strict=True) if p == (0, 1)]
    assert joint.sum() == pytest.approx(1.0)
    true = np.histogram2d(a, frame["b"], bins=[3, 11], range=[[0, 3], [0, 11]])[0] / n
    assert np.abs(joint - true).sum() / 2 < 0.05
    assert [t.shape for t in released.by_class] == [(2, 3), (2, 11), (2, 2)]
    again = measure.Marginals.from_dict(released.to_dict())
    assert again.pairs == released.pairs
    np.testing.assert_allclose(again.joint[0], released.joint[0], atol=1e-8)
