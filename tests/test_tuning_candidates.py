"""Experimental releases that tuning candidates patch in (scripts/tuning/tune_fidelity.py) spend no
more than the ledger records."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from tuning.tune_fidelity import PooledShare  # noqa: E402

from rdpgan.privacy.ledger import PrivacyLedger  # noqa: E402


class RecordedNoise:
    """Stands in for the secret generator: every draw is 0; the stds asked for are kept, with
    whether the ledger held the release when each was drawn."""

    def __init__(self, ledger: PrivacyLedger) -> None:
        self.ledger, self.scales, self.recorded_first = ledger, [], []

    def normal(self, loc, scale, size):
        self.scales.append(float(scale))
        self.recorded_first.append([r.name for r in self.ledger.releases] == ["marginals"])
        return np.zeros(size)


@pytest.mark.parametrize("share", [0.3, 0.5])
def test_pooled_share_draws_the_zcdp_of_the_release_it_records(share):
    """Per-class and pooled tables each move by sqrt(k) for one row: their two Gaussian draws
    cost k/(2 s1^2) + k/(2 s2^2), which must be the recorded release's 1/(2 sigma^2)."""
    rng = np.random.default_rng(0)
    k, sizes = 4, [3, 5, 2, 7]
    codes = np.stack([rng.integers(0, s, 200) for s in sizes], axis=1)
    labels = rng.integers(0, 2, 200)
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    noise = RecordedNoise(ledger)
    out = PooledShare(share)(codes, labels, sizes, 2, ledger, 2.0, noise)
    (release,) = ledger.releases
    sigma = release.noise_multiplier
    assert release.details["sensitivity"] == pytest.approx(np.sqrt(k))
    assert release.details["pooled_share"] == share
    by_class, pooled = noise.scales
    assert k / by_class**2 + k / pooled**2 == pytest.approx(1.0 / sigma**2)
    assert all(noise.recorded_first)  # recorded before any draw
    assert [t.shape for t in out] == [(2, s) for s in sizes]
    assert np.allclose([t.sum(axis=1) for t in out], 1.0)
