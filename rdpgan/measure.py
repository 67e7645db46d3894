"""Measurements: private rows in, released (noisy) statistics out, each one in the ledger.

With DP-SGD (:mod:`rdpgan.privacy.dp_sgd`) and the private schema
(:mod:`rdpgan.privacy.private_schema`), the only place where private rows reach what the
generator learns from. Each function
records its release (mechanism, noise, declared sensitivity) in the run's ledger *before* it
draws the noise from the run's secret randomness, and returns only the noisy statistic or a
post-processing of it; ``tests/privacy/test_neighbouring.py`` checks each declared sensitivity
on neighbouring tables through these same functions.

- :func:`label_counts`: the label histogram (L2 sensitivity 1), which the generator samples its
  labels from; its noisy total stands in for the row count wherever one is needed.
- :func:`release_marginals`: each feature's code distribution within each class (the 2-way
  marginals with the target, which also give every 1-way marginal; :func:`marginals`), and
  where the affordable pairs link every column and the marginals planned with them are within
  the caller's noise limit (the tilt's), a spanning tree of feature pairs chosen by the
  exponential mechanism (:func:`select_pairs`) and their joint distributions
  (:func:`pair_marginals`), which the generator's marginal loss and the sampler's raking
  (:mod:`rdpgan.postprocess`) match;
  :func:`planned_marginal_releases` says what it would record, before any draw.
- :func:`reserve_adaptive_pairs` / :func:`adaptive_pairs`: after training, more pairs of
  features, chosen privately where the trained generator's joint distribution is furthest
  from the rows' (AIM's idea, McKenna et al. 2022), and their joint distributions, which the
  sampler rakes toward. Reserved in the ledger before DP-SGD, so its calibration leaves room.
- :func:`numeric_densities`: each wide numeric column's distribution over fine cells of its
  public range (a hierarchical histogram), from which the generator's bins are cut at equal
  released mass and a decoded number takes its place within its bin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import combinations

import numpy as np

from rdpgan.data.discretize import joint_counts, table_sizes
from rdpgan.errors import UserInputError
from rdpgan.marginals import (
    ADAPTIVE_PAIRS,
    MARGINALS,
    PAIR_MARGINALS,
    Marginals,
    coarsen,
    shrink_toward,
)
from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.privacy.mechanisms.exponential import exponential_mechanism
from rdpgan.privacy.mechanisms.gaussian import noisy_histogram, noisy_tables
from rdpgan.privacy.mechanisms.tree import DENSITY_LEVELS, level_counts, tree_density
from rdpgan.transform import TableTransformer

# One row changes one cell of the label histogram by one.
LABEL_COUNTS_SENSITIVITY = 1.0
# Bins per wide numeric column in the pair marginals: coarser than G's codes, since a pair's
# cells multiply and each carries noise; the cells are those of the fidelity metrics.
PAIR_BINS = 20
# A pair is a candidate only if cells × noise std ≤ this × rows: at a small epsilon a large
# table (16 × 16 education codes) would be mostly noise, which G and raking would then learn.
PAIR_NOISE_LIMIT = 0.5
# Pairs beyond the spanning forest, as a share of its edges: a tree links every column but
# leaves most strong dependences (education with marital status, ...) to G alone.
EXTRA_PAIRS = 1.0


#: The ledger names of the releases G and the sampler match.
ADAPTIVE_SELECTION = "adaptive_pair_selection"
NUMERIC_DENSITIES = "numeric_densities"


def marginal_noise(ledger: PrivacyLedger) -> float:
    """The standard deviation of the noise on one released count of the marginals (the most
    over their releases; 0 when they are exact): public, read from the ledger."""
    return largest_noise(ledger.releases)


def largest_noise(releases: Sequence[Release]) -> float:
    """:func:`marginal_noise` of these releases (recorded, or planned)."""
    return max(
        (
            float(release.noise_multiplier) * float(release.details["sensitivity"])
            for release in releases
            if release.name in (MARGINALS, PAIR_MARGINALS)
        ),
        default=0.0,
    )


def affordable(ledger: PrivacyLedger, epsilon: float) -> bool:
    """Whether the accountant can certify one Gaussian release costing ``epsilon`` on its own
    (always, without privacy): the RDP accountant's orders stop at 1,024 and the moments
    one's at 32, so below about 0.005 and 0.36 (at delta 1e-5) no noise is enough."""
    if not ledger.private:
        return True
    try:
        ledger.calibrate(1.0, 1, epsilon, alone=True)
    except UserInputError:
        return False
    return True


def numeric_densities(
    positions: Sequence[np.ndarray],
    ledger: PrivacyLedger,
    epsilon: float,
    rng: np.random.Generator,
    levels: int = DENSITY_LEVELS,
) -> list[np.ndarray]:
    """Per column, its distribution over 2**``levels`` equal cells of the unit interval, from
    its values' ``positions`` (those in no point mass and not missing).

    Every level of every column is one table, and one row adds one count to one cell of each
    (a row at a point mass or missing, to none), so the stacked tables move by
    sqrt(columns × levels) in L2: the Gaussian mechanism costing ``epsilon`` on its own.
    """
    tables = [table for column in positions for table in level_counts(column, levels)]
    released = _gaussian_tables(NUMERIC_DENSITIES, tables, ledger, epsilon, rng)
    return [
        tree_density([t for t, _ in released[i : i + levels]], released[i][1])
        for i in range(0, len(released), levels)
    ]


def planned_density_release(ledger: PrivacyLedger, epsilon: float) -> list[Release]:
    """The numeric densities' release as :func:`numeric_densities` will record it (none
    without privacy, or where the accountant cannot certify it), planned before the columns it
    covers are known: its cost is its noise multiplier's alone, whatever its sensitivity."""
    if not ledger.private or epsilon <= 0 or not affordable(ledger, epsilon):
        return []
    return [_gaussian_release(NUMERIC_DENSITIES, ledger.calibrate(1.0, 1, epsilon, alone=True), 1)]


def pair_candidates(
    coarse_sizes: Sequence[int], total: float, ledger: PrivacyLedger, epsilon: float
) -> list[tuple[int, int]]:
    """The pairs whose joint table would not drown in its noise: cells × noise std at most
    ``PAIR_NOISE_LIMIT`` × the (released) row count, with the noise the pair release would get
    (``epsilon`` on its own, the sensitivity of the most pairs :func:`select_pairs` can pick).
    Public: it depends on the schema, the budget and released counts only."""
    pairs = list(combinations(range(len(coarse_sizes)), 2))
    if not ledger.private or not pairs:
        return pairs
    if epsilon <= 0:
        return []
    most_pairs = min(len(pairs), round((len(coarse_sizes) - 1) * (1 + EXTRA_PAIRS)))
    try:
        std = ledger.calibrate(1.0, 1, epsilon, alone=True) * math.sqrt(most_pairs)
    except UserInputError:
        # The accountant cannot certify so small a release (the moments accountant's orders
        # stop at 32, so no sigma reaches below ~0.36 at delta=1e-5): no pair is affordable,
        # and the per-class tables take the whole share.
        return []
    return [
        (i, j)
        for i, j in pairs
        if coarse_sizes[i] * coarse_sizes[j] * std <= PAIR_NOISE_LIMIT * total
    ]


def release_marginals(
    features: np.ndarray,
    labels: np.ndarray,
    transformer: TableTransformer,
    label_probs: np.ndarray,
    total: float,
    ledger: PrivacyLedger,
    fraction: float,
    selection_fraction: float,
    rng: np.random.Generator,
    configured: float | None = None,
    noise_limit: float | None = None,
) -> Marginals:
    """The marginals G learns from, target first: every feature's distribution per class
    (``fraction`` / 2 of the budget), then pairs of features chosen privately among the
    candidates (``selection_fraction``; see :func:`select_pairs`) and their joint distributions
    (``fraction`` / 2). Where the candidate pairs at the ``configured`` share (default
    ``fraction``; see :func:`_marginal_shares`) do not link every column, or where the
    marginals planned with them would be noisier than ``noise_limit`` × ``total``, there are no
    pairs and the per-class tables take all of ``fraction``.
    The budget is what the Gaussian releases may spend when this starts (epsilon less any
    pure-DP release before it, such as a private schema)."""
    codes = transformer.codes(features)
    sizes = transformer.code_sizes
    coarse_sizes = table_sizes(transformer.features, PAIR_BINS)
    # Every share is of the same base: what the Gaussian releases may spend before any of these.
    selection_epsilon = selection_fraction * ledger.gaussian_budget()
    candidates, share = _marginal_shares(
        coarse_sizes, total, ledger, fraction, configured, noise_limit
    )
    by_class = marginals(codes, labels, sizes, len(label_probs), ledger, share, rng)
    if not candidates:
        return Marginals(by_class, [], [], [])
    maps = transformer.coarse_maps(PAIR_BINS)
    coarse = coarsen(codes, maps)
    coarse_by_class = [
        np.stack([np.bincount(m, weights=row, minlength=size) for row in table])
        for table, m, size in zip(by_class, maps, coarse_sizes, strict=True)
    ]

    def implied(i: int, j: int) -> np.ndarray:
        """Pair counts if the columns were independent within each class."""
        return total * np.einsum("c,ca,cb->ab", label_probs, coarse_by_class[i], coarse_by_class[j])

    pairs = select_pairs(coarse, coarse_sizes, candidates, implied, ledger, selection_epsilon, rng)
    joint = pair_marginals(coarse, pairs, coarse_sizes, total, ledger, share, rng)
    return Marginals(by_class, pairs, joint, maps)


def _marginal_shares(
    coarse_sizes: Sequence[int],
    total: float,
    ledger: PrivacyLedger,
    fraction: float,
    configured: float | None = None,
    noise_limit: float | None = None,
) -> tuple[list[tuple[int, int]], float]:
    """The candidate pairs, and the epsilon each of the marginals' two Gaussian releases costs
    on its own (the per-class tables take all of ``fraction`` with no candidate).

    Pairs are released only where the candidates at the marginals' ``configured`` share
    (default ``fraction``) link every column (a spanning tree of them exists): where the noise
    leaves most pairs unaffordable (a wide table on few rows, a small epsilon), the few left
    teach G little and halve the per-class tables' share, whose noise then sets every column's
    distribution (tuning_fidelity.csv, round 36). Decided at the configured share, so that
    where the adaptive pairs' share moves to the marginals
    (:func:`rdpgan.adaptive.moves_to_marginals`), a table without pairs at the configured
    split gives it all to the per-class tables, not to pairs the larger share would afford.

    With ``noise_limit``, pairs are released only where the marginals' noise std per count,
    planned with them at the configured share, is at most ``noise_limit`` × ``total`` (sampling
    passes the tilt's limit: tables too noisy to tilt toward): there, on validation splits, the
    whole share for the per-class tables lowered 2-way TVD where pairs raised it on more
    precise tables (tuning_fidelity.csv, rounds 36 and 39)."""
    base = ledger.gaussian_budget()
    at = fraction if configured is None else configured
    assert at <= fraction, "the configured share is at most the share released"
    linking = pair_candidates(coarse_sizes, total, ledger, at / 2 * base)
    if forest_size(len(coarse_sizes), linking) < len(coarse_sizes) - 1:
        return [], fraction * base
    if noise_limit is not None and ledger.private and linking:
        sigma = ledger.calibrate(1.0, 1, at / 2 * base, alone=True)
        rounds = pair_rounds(len(coarse_sizes), linking)
        if largest_noise(_table_releases(len(coarse_sizes), rounds, sigma)) > noise_limit * total:
            return [], fraction * base
    candidates = (
        linking
        if at == fraction
        else pair_candidates(coarse_sizes, total, ledger, fraction / 2 * base)
    )
    return candidates, (fraction / 2 if candidates else fraction) * base


def planned_marginal_releases(
    coarse_sizes: Sequence[int],
    total: float,
    ledger: PrivacyLedger,
    fraction: float,
    selection_fraction: float,
    configured: float | None = None,
    noise_limit: float | None = None,
) -> list[Release]:
    """The releases :func:`release_marginals` would record (none without privacy), planned
    before anything is drawn, from public quantities alone (the schema, the budget, the
    released row count): a fit chooses its budget split with them."""
    if not ledger.private:
        return []
    candidates, share = _marginal_shares(
        coarse_sizes, total, ledger, fraction, configured, noise_limit
    )
    sigma = ledger.calibrate(1.0, 1, share, alone=True)
    rounds = pair_rounds(len(coarse_sizes), candidates) if candidates else 0
    per_class, *pairs = _table_releases(len(coarse_sizes), rounds, sigma)
    selection_epsilon = selection_fraction * ledger.gaussian_budget()
    selection = [_selection_release("pair_selection", selection_epsilon, rounds)] if rounds else []
    return [per_class, *selection, *pairs]


def _table_releases(n_columns: int, rounds: int, sigma: float) -> list[Release]:
    """The records of the per-class tables' release and, with ``rounds`` pairs, the pairs'
    (both at noise multiplier ``sigma``), as :func:`release_marginals` makes them."""
    releases = [_gaussian_release(MARGINALS, sigma, n_columns)]
    if rounds:
        releases.append(_gaussian_release(PAIR_MARGINALS, sigma, rounds))
    return releases


def label_counts(
    labels: np.ndarray,
    n_classes: int,
    ledger: PrivacyLedger,
    noise_multiplier: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """The label histogram plus N(0, sigma^2) per class (exact under ``privacy=none``)."""
    counts = np.bincount(labels, minlength=n_classes).astype(float)
    if not ledger.private:
        ledger.warn("label counts used exactly, without noise (privacy=none)")
        return counts
    details = {"sensitivity": LABEL_COUNTS_SENSITIVITY}
    ledger.record(Release("label_counts", "gaussian", noise_multiplier, 1.0, 1, details))
    return noisy_histogram(counts, noise_multiplier * LABEL_COUNTS_SENSITIVITY, rng)


def marginal_counts(
    codes: np.ndarray, labels: np.ndarray, code_sizes: Sequence[int], n_classes: int
) -> list[np.ndarray]:
    """The private query: for each feature column, its [class, code] count table."""
    return [
        joint_counts([labels, codes[:, i]], [n_classes, size]) for i, size in enumerate(code_sizes)
    ]


def marginals(
    codes: np.ndarray,
    labels: np.ndarray,
    code_sizes: Sequence[int],
    n_classes: int,
    ledger: PrivacyLedger,
    epsilon: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Per feature column, [class, code]: the code distribution within each class.

    One row adds one count to one cell of each of the k tables, so the stacked tables move by
    sqrt(k) in L2: the Gaussian mechanism with sigma calibrated so that this release on its
    own costs ``epsilon`` (the ledger composes it with the rest).
    """
    tables = marginal_counts(codes, labels, code_sizes, n_classes)
    released = _gaussian_tables(MARGINALS, tables, ledger, epsilon, rng)
    return [conditional_distributions(t, std) for t, std in released]


def pair_counts(
    coarse: np.ndarray, pairs: Sequence[tuple[int, int]], coarse_sizes: Sequence[int]
) -> list[np.ndarray]:
    """The private query: for each pair of feature columns, its [code, code] count table."""
    return [
        joint_counts([coarse[:, i], coarse[:, j]], [coarse_sizes[i], coarse_sizes[j]])
        for i, j in pairs
    ]


def pair_utilities(
    coarse: np.ndarray,
    coarse_sizes: Sequence[int],
    pairs: Sequence[tuple[int, int]],
    expected: Sequence[np.ndarray],
) -> np.ndarray:
    """The private query of the selection: how far each pair's counts are from ``expected``
    (counts the released marginals already imply), in L1. One row moves one cell of each
    table by one, so each utility moves by at most 1."""
    counts = pair_counts(coarse, pairs, coarse_sizes)
    return np.array([np.abs(c - e).sum() for c, e in zip(counts, expected, strict=True)])


def _merge(component: list[int], i: int, j: int) -> list[int]:
    """Union-find by relabelling: j's component joins i's."""
    old = component[j]
    return [component[i] if c == old else c for c in component]


def forest_size(n_columns: int, candidates: Sequence[tuple[int, int]]) -> int:
    """Edges in a spanning forest of the candidate pairs: how many a selection makes."""
    component = list(range(n_columns))
    edges = 0
    for i, j in candidates:
        if component[i] != component[j]:
            component, edges = _merge(component, i, j), edges + 1
    return edges


def pair_rounds(n_columns: int, candidates: Sequence[tuple[int, int]]) -> int:
    """How many pairs :func:`select_pairs` picks among ``candidates`` (public)."""
    return min(len(candidates), round(forest_size(n_columns, candidates) * (1 + EXTRA_PAIRS)))


def select_pairs(
    coarse: np.ndarray,
    coarse_sizes: Sequence[int],
    candidates: Sequence[tuple[int, int]],
    implied: Callable[[int, int], np.ndarray],
    ledger: PrivacyLedger,
    epsilon: float,
    rng: np.random.Generator,
) -> list[tuple[int, int]]:
    """Pairs to measure, strongest dependence first: a spanning forest of the (public)
    candidates, as MST (McKenna et al. 2021) by Kruskal's algorithm, then as many more
    candidates again (``EXTRA_PAIRS``), each pick by the exponential mechanism (utility
    sensitivity 1) with ``epsilon`` split evenly over the picks. ``implied(i, j)`` gives the
    counts the earlier releases imply for the pair."""
    forest = forest_size(len(coarse_sizes), candidates)
    rounds = pair_rounds(len(coarse_sizes), candidates)
    if rounds == 0:
        return []
    if ledger.private:
        ledger.record(_selection_release("pair_selection", epsilon, rounds))
    component = list(range(len(coarse_sizes)))
    chosen: list[tuple[int, int]] = []
    utilities = pair_utilities(coarse, coarse_sizes, candidates, [implied(*p) for p in candidates])
    for pick_number in range(rounds):
        open_ = [
            n
            for n, (i, j) in enumerate(candidates)
            if (component[i] != component[j] if pick_number < forest else (i, j) not in chosen)
        ]
        if ledger.private:
            pick = open_[exponential_mechanism(utilities[open_], epsilon / rounds, 1.0, rng)]
        else:
            pick = open_[int(np.argmax(utilities[open_]))]
        i, j = candidates[pick]
        chosen.append((i, j))
        component = _merge(component, i, j)
    return chosen


def _selection_release(name: str, epsilon: float, rounds: int) -> Release:
    """The record of ``rounds`` exponential-mechanism picks (utility sensitivity 1) sharing
    ``epsilon``."""
    details = {"mechanism": "exponential", "sensitivity": 1.0, "rounds": rounds}
    return Release(name, "pure", epsilon=epsilon, details=details)


def pair_marginals(
    coarse: np.ndarray,
    pairs: Sequence[tuple[int, int]],
    coarse_sizes: Sequence[int],
    total: float,
    ledger: PrivacyLedger,
    epsilon: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Per pair, the joint [code, code] distribution: noisy counts (Gaussian, sqrt(pairs) L2
    sensitivity, costing ``epsilon`` on its own) made consistent with ``total``."""
    tables = pair_counts(coarse, pairs, coarse_sizes)
    released = _gaussian_tables(PAIR_MARGINALS, tables, ledger, epsilon, rng)
    return [consistent_table(t, total) for t, _ in released]


def _gaussian_tables(
    name: str,
    tables: list[np.ndarray],
    ledger: PrivacyLedger,
    epsilon: float,
    rng: np.random.Generator,
) -> list[tuple[np.ndarray, float]]:
    """(noisy table, noise std) per table. Every row adds one count to one cell of each table,
    so the stacked tables move by sqrt(len(tables)) in L2; one noise draw covers them all."""
    assert tables, "a release of no table would charge for nothing"
    if not ledger.private:
        ledger.warn(f"{name} used exactly, without noise (privacy=none)")
        return [(t, 0.0) for t in tables]
    sigma = ledger.calibrate(1.0, 1, epsilon, alone=True)
    ledger.record(_gaussian_release(name, sigma, len(tables)))
    return _noisy_tables(tables, sigma * math.sqrt(len(tables)), rng)


def _gaussian_release(name: str, sigma: float, tables: int) -> Release:
    """The record of ``tables`` count tables released at once with noise multiplier ``sigma``:
    every row adds one count to one cell of each, so they move by sqrt(tables) in L2."""
    details = {"sensitivity": math.sqrt(tables), "tables": tables}
    return Release(name, "gaussian", sigma, 1.0, 1, details)


def _noisy_tables(
    tables: list[np.ndarray], std: float, rng: np.random.Generator
) -> list[tuple[np.ndarray, float]]:
    """Each table plus N(0, std^2) per cell (one draw for all), with ``std``."""
    return [(noisy, std) for noisy in noisy_tables(tables, std, rng)]


def reserve_adaptive_pairs(
    rounds: int, ledger: PrivacyLedger, selection_epsilon: float, epsilon: float
) -> None:
    """Record the adaptive pairs' two releases ahead of their draw (which follows training):
    ``rounds`` exponential-mechanism picks sharing ``selection_epsilon`` (utility sensitivity
    1), and their ``rounds`` joint tables (Gaussian, sqrt(rounds) L2 sensitivity, costing
    ``epsilon`` on its own). Each is marked ``drawn: False`` until :func:`adaptive_pairs`
    draws it, so a resumed run never draws them twice."""
    if not ledger.private or rounds < 1:
        return
    sigma = ledger.calibrate(1.0, 1, epsilon, alone=True)
    for release in (
        _selection_release(ADAPTIVE_SELECTION, selection_epsilon, rounds),
        _gaussian_release(ADAPTIVE_PAIRS, sigma, rounds),
    ):
        release.details["drawn"] = False
        ledger.record(release)


def reserved_rounds(ledger: PrivacyLedger) -> int:
    """The adaptive picks reserved and not yet drawn (0 without a reservation, or once it
    was drawn: a resumed run never draws them twice)."""
    reserved = ledger.find(ADAPTIVE_SELECTION)
    return 0 if reserved is None or reserved.details["drawn"] else int(reserved.details["rounds"])


def adaptive_pairs(
    coarse: np.ndarray,
    coarse_sizes: Sequence[int],
    candidates: Sequence[tuple[int, int]],
    model_counts: Sequence[np.ndarray],
    rounds: int,
    total: float,
    ledger: PrivacyLedger,
    rng: np.random.Generator,
) -> tuple[list[tuple[int, int]], list[np.ndarray]]:
    """``rounds`` pairs chosen one by one, without replacement, by how far the rows' counts
    are from ``model_counts`` (what the trained generator's sampler makes of each candidate,
    post-processing) in L1, then their joint distributions (made consistent with ``total``).
    With privacy, the reserved releases (:func:`reserve_adaptive_pairs`), marked drawn before
    any draw; without, the furthest pairs, exact."""
    rounds = min(rounds, len(candidates))
    selection, measurement = ledger.find(ADAPTIVE_SELECTION), ledger.find(ADAPTIVE_PAIRS)
    if ledger.private:
        if selection is None or measurement is None or reserved_rounds(ledger) < rounds:
            raise ValueError("adaptive pairs drawn beyond what the ledger reserved")
        selection.details["drawn"] = measurement.details["drawn"] = True
        if ledger.on_record is not None:  # on disk before any draw
            ledger.on_record()
    if rounds <= 0:
        return [], []
    utilities = pair_utilities(coarse, coarse_sizes, candidates, model_counts)
    open_ = list(range(len(candidates)))
    chosen = []
    for _ in range(rounds):
        if selection is not None and ledger.private:
            epsilon = float(selection.epsilon) / int(selection.details["rounds"])
            pick = open_[exponential_mechanism(utilities[open_], epsilon, 1.0, rng)]
        else:
            pick = open_[int(np.argmax(utilities[open_]))]
        chosen.append(candidates[pick])
        open_.remove(pick)
    tables = pair_counts(coarse, chosen, coarse_sizes)
    if measurement is not None and ledger.private:
        std = float(measurement.noise_multiplier) * float(measurement.details["sensitivity"])
        released = _noisy_tables(tables, std, rng)
    else:
        ledger.warn(f"{ADAPTIVE_PAIRS} used exactly, without noise (privacy=none)")
        released = [(t, 0.0) for t in tables]
    return chosen, [consistent_table(t, total) for t, _ in released]


def consistent_table(noisy: np.ndarray, total: float) -> np.ndarray:
    """The distribution max(0, x - t) / total, t chosen so that it sums to ``total`` (Wang et
    al. 2020's Norm-Sub): small noisy cells go to 0 instead of each keeping positive noise,
    which clipping alone would leave spread over every empty cell. t in closed form, as for a
    projection onto the simplex (Duchi et al. 2008): with the cells in decreasing order, the
    last k whose cell exceeds (its running sum - total) / k gives t."""
    values = noisy.ravel()
    positive = np.clip(values, 0.0, None)
    if positive.sum() <= 0:
        return np.full(noisy.shape, 1.0 / noisy.size)
    ordered = np.sort(values)[::-1]
    shifts = (np.cumsum(ordered) - total) / np.arange(1, len(ordered) + 1)
    kept_cells = np.flatnonzero(ordered > shifts)  # none only where total <= 0
    kept = np.clip(values - shifts[kept_cells[-1]], 0.0, None) if len(kept_cells) else positive
    return (kept / kept.sum()).reshape(noisy.shape)


def conditional_distributions(counts: np.ndarray, noise_std: float) -> np.ndarray:
    """Valid per-class distributions from (noisy) [class, code] counts (post-processing).

    Each class's row, and the pooled row, is made a distribution by Norm-Sub
    (:func:`consistent_table`, with the row's own noisy sum, an unbiased total): clipping alone
    would leave positive noise on every empty cell, which on a fine grid (100 codes) at a small
    epsilon is a large share of the mass. Each class's distribution is then shrunk toward the
    pooled one by max(0, 1 - v / d^2) per cell, where d is its deviation from the pooled
    distribution and v its noise variance (noise_std / class total)^2: a difference well above
    the noise (what tells the classes apart) is kept, one within the noise is dropped, so a
    rare class at a small epsilon falls back to the pooled distribution instead of teaching G
    noise.
    """
    totals = np.clip(counts.sum(axis=1), 1.0, None)
    pooled = consistent_table(counts.sum(axis=0), float(totals.sum()))
    within = np.stack([consistent_table(row, t) for row, t in zip(counts, totals, strict=True)])
    return shrink_toward(pooled, within, (noise_std / totals)[:, None] ** 2)
