"""The product checks itself for free: how far sampled rows sit from every statistic the model
released, in units of that statistic's noise.

Each released share (a code's share of a class in the per-class marginals, a cell's share of
the table in a released pair) is compared with the same share among the synthetic rows; the gap
is divided by the standard deviation the gap would have if the rows followed the data exactly:
the release's noise on the share (its count noise over the released rows it is a share of) and
the rows' own sampling spread. A gap of a few units is noise; tens of units are rows that
disagree with what was released. Post-processing: it reads released values, their noise (public,
from the ledger) and synthetic rows, never a private row, so it costs nothing and may be shown to
anyone the model may be shown to.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from rdpgan.marginals import ADAPTIVE_PAIRS, MARGINALS, PAIR_MARGINALS, Marginals, coarsen

if TYPE_CHECKING:  # (sampling imports this module: nothing of torch or the accountants)
    from rdpgan.privacy.ledger import PrivacyLedger

# Worth a line on the console: a release whose largest gap passes LOUD_GAP stds, or whose gaps'
# root mean square passes LOUD_RMS (rows off it throughout). The largest of thousands of cells
# reaches 5 by chance, and 7.6 on a default Adult run at eps=8 whose rows follow their releases
# (rms 0.6-0.9: the pair education x education-num, one a function of the other).
LOUD_GAP = 10.0
LOUD_RMS = 2.0


@dataclass(frozen=True)
class ReleaseGap:
    """One release's gaps: the largest (with where), the root mean square, over its cells."""

    release: str
    cells: int
    worst: float
    rms: float
    where: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class NoiseStds:
    """The standard deviation of the noise on one released count, per release (0: exact)."""

    marginals: float
    pairs: float
    adaptive_pairs: float

    @classmethod
    def from_ledger(cls, ledger: PrivacyLedger | None, fallback: float) -> NoiseStds:
        """Each release's own count noise, from the ledger; ``fallback`` (the largest of
        them, which a saved model keeps) where there is no ledger, or for a release it lacks."""

        def std(name: str) -> float:
            release = ledger.find(name) if ledger is not None and ledger.private else None
            if release is None or release.noise_multiplier is None:
                return fallback if ledger is None or ledger.private else 0.0
            return float(release.noise_multiplier) * float(release.details["sensitivity"])

        return cls(std(MARGINALS), std(PAIR_MARGINALS), std(ADAPTIVE_PAIRS))


def release_gaps(
    marginals: Marginals,
    noise: NoiseStds,
    label_probs: np.ndarray,
    released_rows: int,
    codes: np.ndarray,
    labels: np.ndarray,
    names: Sequence[str],
    released_pairs: int | None = None,
    classes: Sequence[object] | None = None,
) -> list[ReleaseGap]:
    """The gaps of synthetic rows (``codes`` [rows, feature columns], ``labels``) from the
    released per-class marginals and pairs, the columns called ``names`` and the classes
    ``classes`` (their codes, when None). ``released_pairs``: how many of the marginals' pairs
    the pair release made (the rest were measured after training); all, when None."""
    probs = np.asarray(label_probs, dtype=float) / float(np.sum(label_probs))
    class_rows = probs * released_rows
    gaps = []
    per_class = []
    for column, released in enumerate(marginals.by_class):
        for c in range(released.shape[0]):
            synthetic = codes[labels == c, column]
            per_class.append(
                (
                    released[c],
                    _shares(synthetic, released.shape[1]),
                    len(synthetic),
                    noise.marginals / max(class_rows[c], 1.0),
                    f"{names[column]} in class {c if classes is None else classes[c]}",
                )
            )
    gaps.append(_gap(MARGINALS, per_class))
    if marginals.pairs:
        coarse = coarsen(codes, marginals.maps)
        first = len(marginals.pairs) if released_pairs is None else released_pairs
        for name, std, chosen in (
            (PAIR_MARGINALS, noise.pairs, range(first)),
            (ADAPTIVE_PAIRS, noise.adaptive_pairs, range(first, len(marginals.pairs))),
        ):
            cells = []
            for p in chosen:
                (i, j), joint = marginals.pairs[p], marginals.joint[p]
                flat = coarse[:, i] * joint.shape[1] + coarse[:, j]
                synthetic = _shares(flat, joint.size)
                share_std = std / max(released_rows, 1)
                cells.append(
                    (joint.ravel(), synthetic, len(flat), share_std, f"{names[i]} × {names[j]}")
                )
            if cells:
                gaps.append(_gap(name, cells))
    return gaps


def _shares(codes: np.ndarray, size: int) -> np.ndarray:
    counts = np.bincount(codes, minlength=size)[:size].astype(float)
    return counts / max(counts.sum(), 1.0)


def _gap(name: str, tables: Sequence[tuple[np.ndarray, np.ndarray, int, float, str]]) -> ReleaseGap:
    """(released shares, synthetic shares, synthetic rows, noise std of a released share,
    label) per table, as one release's gaps."""
    worst, where, squares, cells = 0.0, "", 0.0, 0
    for released, synthetic, rows, share_std, label in tables:
        # The rows' own spread: a share of ``rows`` draws at the released share, read as no
        # surer than one row in either direction (an exact release, privacy=none, puts cells
        # at 0: one synthetic row there would be millions of stds, not one).
        one_row = min(1.0 / max(rows, 1), 0.5)
        share = np.clip(released, one_row, 1.0 - one_row)
        std = np.sqrt(share_std**2 + share * (1 - share) / max(rows, 1))
        z = np.abs(synthetic - released) / std
        squares += float(np.sum(z**2))
        cells += z.size
        if z.size and float(z.max()) > worst:
            worst, where = float(z.max()), label
    return ReleaseGap(name, cells, worst, math.sqrt(squares / max(cells, 1)), where)


def overall(gaps: Sequence[ReleaseGap]) -> float:
    """The root mean square gap over every released cell of every release."""
    cells = sum(g.cells for g in gaps)
    return math.sqrt(sum(g.rms**2 * g.cells for g in gaps) / max(cells, 1))


def loud_line(gaps: Sequence[ReleaseGap]) -> str | None:
    """One console line where a release's rows sit more than :data:`LOUD_GAP` stds off one of
    its cells, or :data:`LOUD_RMS` off its cells on average."""
    loud = [g for g in gaps if g.worst > LOUD_GAP or g.rms > LOUD_RMS]
    if not loud:
        return None
    worst = max(loud, key=lambda g: g.worst)
    return (
        f"self-check: synthetic rows sit up to {worst.worst:.1f} noise stds (rms {worst.rms:.1f}) "
        f"from the released {worst.release} ({worst.where}); see metrics.json's self_check"
    )
