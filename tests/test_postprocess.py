"""Tilting and raking bring sampled rows' marginals to the released ones, per class."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rdpgan import kernels, numpy_kernels, postprocess, sampler
from rdpgan.frozen import FrozenGenerator
from rdpgan.marginals import Marginals
from rdpgan.measure import conditional_distributions
from rdpgan.models import Generator
from rdpgan.postprocess import (
    RAKING_FLOOR,
    RAKING_STALL,
    RAKING_SWEEPS,
    TILT_LIMIT,
    TILT_TOLERANCE,
    Herder,
    Raker,
    class_tilts,
    fit_tilt,
    herd,
    raking_weights,
    systematic_resample,
    tilt_goal,
)
from rdpgan.transform import Span


def skewed_pool(rng: np.random.Generator, n: int) -> np.ndarray:
    """Two dependent columns whose pool marginals are far from the targets below."""
    first = rng.choice(3, size=n, p=[0.7, 0.2, 0.1])
    second = (first + rng.choice(2, size=n, p=[0.8, 0.2])) % 4
    return np.stack([first, second], axis=1)


TARGETS = [np.array([0.2, 0.3, 0.5]), np.array([0.1, 0.3, 0.35, 0.25])]  # reachable, inside


def test_raking_weights_reproduce_every_target_marginal():
    codes = skewed_pool(np.random.default_rng(0), 5000)
    weights = raking_weights(codes.T, TARGETS)
    assert weights.sum() == pytest.approx(1.0)
    for column, target in enumerate(TARGETS):
        weighted = np.bincount(codes[:, column], weights=weights, minlength=len(target))
        np.testing.assert_allclose(weighted, target, atol=1e-3)


def numpy_raking_weights(cells: np.ndarray, targets: list[np.ndarray]) -> np.ndarray:
    """raking_weights as numpy passes (bincount, then rescale, table by table): the reference
    the fused sweep (rescale_and_count, compiled or numpy) must match to the bit."""
    weights = np.full(cells.shape[1], 1.0 / cells.shape[1])
    previous = np.inf
    for _ in range(RAKING_SWEEPS):
        furthest = 0.0
        for table, target in zip(cells, targets, strict=True):
            current = np.bincount(table, weights=weights, minlength=len(target))
            reachable = current > 0
            goal = np.where(reachable, target, 0.0)
            if goal.sum() <= 0:
                continue
            goal = (
                1 - RAKING_FLOOR
            ) * goal / goal.sum() + RAKING_FLOOR * reachable / reachable.sum()
            furthest = max(furthest, 0.5 * float(np.abs(goal - current).sum()))
            ratio = np.where(reachable, goal / np.maximum(current, np.finfo(float).tiny), 0.0)
            weights *= ratio[table]
        if furthest > (1 - RAKING_STALL) * previous:
            break
        previous = furthest
    return weights


@pytest.mark.parametrize("loops", [kernels, numpy_kernels], ids=["compiled", "numpy"])
@pytest.mark.parametrize("tables", [1, 2, 3])
def test_raking_weights_are_numpys_to_the_bit(tables, loops):
    """One table, two, and a third whose target is zero wherever the pool reaches (skipped in
    every sweep)."""
    codes = skewed_pool(np.random.default_rng(3), 5000)
    cells = np.vstack([codes.T, codes[:, :1].T])[:tables]
    targets = [*TARGETS, np.array([0.0, 0.0, 0.0, 1.0])][:tables]
    weights = raking_weights(cells, targets, loops=loops)
    assert np.array_equal(weights, numpy_raking_weights(cells, targets))


def test_codes_the_pool_never_made_give_their_mass_to_the_others():
    codes = np.array([[0], [0], [1]])
    weights = raking_weights(codes.T, [np.array([0.25, 0.25, 0.5])])  # code 2 is unreachable
    np.testing.assert_allclose(np.bincount(codes[:, 0], weights=weights), [0.5, 0.5])


def test_systematic_resampling_keeps_each_row_floor_or_ceil_of_its_share():
    rng = np.random.default_rng(1)
    weights = rng.dirichlet(np.ones(50))
    kept = np.bincount(systematic_resample(weights, 1000, rng), minlength=50)
    assert kept.sum() == 1000
    assert (kept >= np.floor(1000 * weights)).all() and (kept <= np.ceil(1000 * weights)).all()


def test_rake_rows_matches_each_class_table_and_each_released_pair():
    rng = np.random.default_rng(2)
    codes = skewed_pool(rng, 8000)
    labels = rng.integers(0, 2, size=8000)
    other = [np.array([0.6, 0.3, 0.1]), np.array([0.4, 0.4, 0.15, 0.05])]  # class 1
    by_class = [np.stack([TARGETS[c], other[c]]) for c in range(2)]  # [class, code] per column
    # The pair (0, 1) at coarse codes: column 1's codes 0-1 and 2-3 merged.
    maps = [np.arange(3), np.array([0, 0, 1, 1])]
    joint = np.array([[0.4, 0.0], [0.2, 0.1], [0.0, 0.3]])  # consistent with by_class
    released = Marginals(by_class, [(0, 1)], [joint], maps)
    label_probs = np.array([0.5, 0.5])
    keep = Raker(released, label_probs)(codes, labels, 4000, rng)
    rows, kept_labels = codes[keep], labels[keep]
    coarse = np.bincount(rows[:, 0] * 2 + maps[1][rows[:, 1]], minlength=6) / len(rows)
    np.testing.assert_allclose(coarse, joint.ravel(), atol=0.03)
    for label in (0, 1):
        share = np.bincount(rows[kept_labels == label, 0], minlength=3)
        np.testing.assert_allclose(share / share.sum(), by_class[0][label], atol=0.03)
    alone = Raker(released, label_probs, only=1)(codes, labels, 500, rng)
    share = np.bincount(codes[alone, 1], minlength=4) / 500
    np.testing.assert_allclose(share, other[1], atol=0.01)


def test_a_noisy_pair_that_disagrees_with_a_column_leaves_the_column_its_release():
    """Issue 52: the per-class columns have the final say. A released pair whose (noisy)
    margin disagrees with a column's release used to pull the raked rows off the column (the
    pairs were swept after the columns); now the column is met and the pair as far as it
    agrees."""
    rng = np.random.default_rng(4)
    codes = skewed_pool(rng, 20_000)
    labels = rng.integers(0, 2, size=20_000)
    by_class = [np.stack([target, target]) for target in TARGETS]  # the same in each class
    maps = [np.arange(3), np.arange(4)]
    # Column 0's margin in the pair is (0.5, 0.3, 0.2), its release (0.2, 0.3, 0.5).
    joint = np.outer([0.5, 0.3, 0.2], TARGETS[1])
    released = Marginals(by_class, [(0, 1)], [joint], maps)
    keep = Raker(released, np.array([0.5, 0.5]))(codes, labels, 8000, rng)
    share = np.bincount(codes[keep, 0], minlength=3) / len(keep)
    np.testing.assert_allclose(share, TARGETS[0], atol=0.01)


def test_settling_tables_meet_their_targets_after_the_rest_stall():
    rng = np.random.default_rng(5)
    cells = np.stack([rng.integers(0, 3, 5000), rng.integers(0, 3, 5000)])
    # The same cells twice, with targets that disagree: the settled one wins.
    cells[1] = cells[0]
    targets = [np.array([0.6, 0.3, 0.1]), np.array([0.1, 0.3, 0.6])]
    settled = raking_weights(cells, targets, settle=1)
    np.testing.assert_allclose(np.bincount(cells[1], settled), targets[1], atol=1e-3)


def test_herded_rows_follow_the_pool_in_every_table_where_drawn_rows_scatter():
    """Herding 1,000 of 8,000 rows keeps every cell of every table within 1.5 rows of its
    share of the pool (rows drawn independently miss by several: the test of the bound), picks
    each row at most once, and keeps the dependence between the columns that the pool has."""
    rng = np.random.default_rng(3)
    codes = skewed_pool(rng, 8000)
    cells, sizes = codes.T, [3, 4]
    one_class = np.zeros(8000, np.int64)
    kept = herd(cells, one_class, sizes, 1, 1000)
    assert len(np.unique(kept)) == 1000

    def worst_miss(rows: np.ndarray) -> float:
        return max(
            np.abs(
                np.bincount(cells[t, rows], minlength=size)
                - np.bincount(cells[t], minlength=size) / 8
            ).max()
            for t, size in enumerate(sizes)
        )

    assert worst_miss(kept) <= 1.5
    assert worst_miss(rng.choice(8000, 1000, replace=False)) > 3
    same = codes[kept, 1] == codes[kept, 0]  # the pool's rows keep their second code 80%
    assert abs(same.mean() - 0.8) < 0.05
    with pytest.raises(ValueError, match="more rows than the pool"):
        herd(cells, one_class, sizes, 1, 8001)


def picks_table_by_table(
    score: np.ndarray, gain: np.ndarray, cells: np.ndarray, n: int
) -> np.ndarray:
    """Herding's picks as written from their definition: each pick, one off every row sharing
    the picked row's cell, table after table (``cells`` [tables, rows])."""
    chosen = []
    for _ in range(n):
        row = int(np.argmax(score))
        chosen.append(row)
        for table in cells:
            score[table == table[row]] -= 1.0
        score[row] = -np.inf
        score += gain
    return np.array(chosen)


@pytest.mark.parametrize("pairs", ["none", "some", "every"])
def test_herdings_loops_pick_as_the_tables_one_by_one_would(pairs):
    """Both loops count a row's shared cells from its columns' matches with the picked row
    (the pairs among them, with every pair herded, without reading a pair): the same rows in
    the same order as taking one off table by table, on a pool of 512 rows, whose scores are
    sums of 512ths (exact, so any difference would be a different pick, not rounding), with
    many ties (to the first row). Both change ``score`` alike."""
    rng = np.random.default_rng(11)
    sizes, rows = [3, 2, 4, 2], 512
    codes = np.stack([rng.integers(0, s, rows) for s in sizes])
    labels = rng.integers(0, 2, rows)
    chosen_pairs = {"none": [], "some": [(0, 2), (1, 3)], "every": None}[pairs]
    if chosen_pairs is None:
        chosen_pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    tables = [labels * s + c for s, c in zip(sizes, codes, strict=True)]
    tables += [codes[i] * sizes[j] + codes[j] for i, j in chosen_pairs]
    cells = np.stack(tables)
    gain = sum(np.bincount(t)[t] / rows for t in cells)
    expected = picks_table_by_table(gain.copy(), gain, cells, 300)
    layout = np.array(chosen_pairs, np.int64).reshape(-1, 2)
    for loops in (kernels, numpy_kernels):
        score = gain.copy()
        picked = loops.herd_picks(score, gain, codes.astype(np.int8), labels, layout, 300)
        np.testing.assert_array_equal(picked, expected)
    ours, theirs = gain.copy(), gain.copy()
    kernels.herd_picks(ours, gain, codes.astype(np.int16), labels, layout, 300)
    numpy_kernels.herd_picks(theirs, gain, codes.astype(np.int16), labels, layout, 300)
    np.testing.assert_array_equal(ours, theirs)
    assert len(np.unique(expected)) == 300


@pytest.mark.parametrize("loops", [kernels, numpy_kernels])
def test_herd_narrows_codes_to_a_type_that_holds_every_code(loops):
    """A column of 300 codes (past int8's 127) herds as its definition picks, through herd()."""
    rng = np.random.default_rng(12)
    sizes, rows = [300, 3], 512
    wide = rng.integers(0, 2, rows) * 256 + rng.integers(0, 2, rows)  # 0 and 256: alike in int8
    codes = np.stack([wide, rng.integers(0, 3, rows)])
    labels = np.zeros(rows, np.int64)
    cells = np.stack([codes[0], codes[1], codes[0] * 3 + codes[1]])
    gain = sum(np.bincount(t)[t] / rows for t in cells)
    expected = picks_table_by_table(gain.copy(), gain, cells, 200)
    picked = herd(codes, labels, sizes, 1, 200, [(0, 1)], loops=loops)
    np.testing.assert_array_equal(picked, expected)


@pytest.mark.parametrize("loops", [kernels, numpy_kernels])
def test_herdings_loops_refuse_pairs_that_are_not_distinct_pairs_of_columns(loops):
    codes, labels = np.zeros((3, 4), np.int8), np.zeros(4, np.int64)
    for bad in ([(0, 0)], [(1, 0)], [(0, 3)], [(0, 1), (0, 1)], [(-1, 1)]):
        with pytest.raises(ValueError, match="distinct pairs"):
            loops.herd_picks(np.zeros(4), np.zeros(4), codes, labels, np.array(bad), 1)
    with pytest.raises(ValueError, match="differ in rows"):
        loops.herd_picks(np.zeros(4), np.zeros(4), codes, labels[:3], np.zeros((0, 2), int), 1)


def test_what_one_pools_picks_fall_short_by_is_carried_to_the_next():
    """A code held by 1 row in 400 is too rare to be picked among 100 rows of one pool; over
    20 pools of 100 picks each it is kept 5 times (to within one), its share; without the
    carry, hardly ever."""
    rng = np.random.default_rng(5)

    def pool() -> np.ndarray:
        codes = rng.choice(2, size=400, p=[0.6, 0.4])
        codes[rng.integers(400)] = 2  # one rare row in every pool: a share of 1/400
        return codes

    residual = np.zeros(3)
    carried = alone = 0
    for _ in range(20):
        codes = pool()
        one_class = np.zeros(400, np.int64)
        kept = herd(codes[None, :], one_class, [3], 1, 100, residual=residual)
        carried += int((codes[kept] == 2).sum())
        codes = pool()
        alone += int((codes[herd(codes[None, :], one_class, [3], 1, 100)] == 2).sum())
    assert abs(carried - 5) <= 1
    assert alone <= 1


def test_a_herder_follows_each_columns_distribution_within_each_class():
    """Its tables are the (class, code) cells of each column, so the class shares and each
    class's column distributions follow the pool; the rows come back in random order."""
    rng = np.random.default_rng(4)
    codes = skewed_pool(rng, 6000)
    labels = (codes[:, 0] == 0) & (rng.random(6000) < 0.5)  # classes differ in column 0
    labels = labels.astype(np.int64)
    kept = Herder([3, 4], 2)(codes, labels, 1500, rng)
    assert len(np.unique(kept)) == 1500 and not (np.diff(kept) > 0).all()
    for column, size in enumerate((3, 4)):
        for label in (0, 1):
            pool = np.bincount(codes[labels == label, column], minlength=size) / 4
            chosen = np.bincount(codes[kept][labels[kept] == label, column], minlength=size)
            assert np.abs(chosen - pool).max() <= 1.5


def test_a_herder_with_pairs_follows_every_pair_of_columns_too():
    """With ``pairs``, each (code, code) table of those pairs of columns follows the pool to
    within 1.5 rows a cell, where herding the columns alone leaves the pairs to chance (it
    misses a pair's cell by more)."""
    rng = np.random.default_rng(5)
    codes = np.column_stack([skewed_pool(rng, 6000), rng.integers(0, 3, 6000)])
    codes[:, 2] = np.where(rng.random(6000) < 0.6, codes[:, 0], codes[:, 2])
    labels = rng.integers(0, 2, 6000)
    sizes = [3, 4, 3]

    def worst_pair_miss(kept: np.ndarray) -> float:
        misses = []
        for i, j in ((0, 1), (0, 2), (1, 2)):
            cells = codes[:, i] * sizes[j] + codes[:, j]
            pool = np.bincount(cells, minlength=sizes[i] * sizes[j]) / 4
            misses.append(np.abs(np.bincount(cells[kept], minlength=len(pool)) - pool).max())
        return max(misses)

    paired = Herder(sizes, 2, pairs=[(0, 1), (0, 2), (1, 2)])
    assert len(paired.shapes) == 3 + 3
    kept = paired(codes, labels, 1500, rng)
    assert len(np.unique(kept)) == 1500 and worst_pair_miss(kept) <= 1.5
    for column, size in enumerate(sizes):  # the columns within each class still follow it
        for label in (0, 1):
            pool = np.bincount(codes[labels == label, column], minlength=size) / 4
            chosen = np.bincount(codes[kept][labels[kept] == label, column], minlength=size)
            assert np.abs(chosen - pool).max() <= 1.5
    assert worst_pair_miss(Herder(sizes, 2)(codes, labels, 1500, rng)) > 3


def test_conditional_distributions_are_exact_without_noise_and_valid_with_it():
    counts = np.array([[30.0, 10.0, 0.0], [5.0, 5.0, 10.0]])
    np.testing.assert_allclose(
        conditional_distributions(counts, 0.0), [[0.75, 0.25, 0.0], [0.25, 0.25, 0.5]], atol=1e-9
    )
    noisy = counts + np.random.default_rng(3).normal(0, 20, size=counts.shape)
    released = conditional_distributions(noisy, 20.0)
    assert (released >= 0).all()
    np.testing.assert_allclose(released.sum(axis=1), 1.0)


def test_sparse_noisy_counts_lose_less_mass_to_empty_cells_than_clipping_would():
    """100 codes, 10 of them used: clipping keeps noise on 90 empty cells; Norm-Sub does not."""
    rng = np.random.default_rng(4)
    truth = np.zeros((1, 100))
    truth[0, rng.choice(100, 10, replace=False)] = rng.uniform(200, 800, size=10)
    expected = truth / truth.sum()
    ours, clipped = [], []
    for _ in range(50):
        noisy = truth + rng.normal(0, 50, size=truth.shape)
        ours.append(np.abs(conditional_distributions(noisy, 50.0) - expected).sum() / 2)
        naive = np.clip(noisy, 0, None)
        clipped.append(np.abs(naive / naive.sum() - expected).sum() / 2)
    assert np.mean(ours) < 0.5 * np.mean(clipped)


def test_a_class_whose_rows_all_miss_their_target_cells_keeps_its_share():
    """An untrained G can put every row of a class where the (noisy) target is 0: raking must
    not drop the class."""
    codes = np.zeros((1000, 1), dtype=np.int64)  # every row on code 0 ...
    labels = np.repeat([0, 1], 500)
    by_class = [np.array([[0.5, 0.5], [0.0, 1.0]])]  # ... where class 1 has no mass
    released = Marginals(by_class, [], [], [np.arange(2)])
    rake = Raker(released, np.array([0.7, 0.3]))
    keep = rake(codes, labels, 200, np.random.default_rng(0))
    assert np.bincount(labels[keep], minlength=2).tolist() == [140, 60]


def softmax(logits: np.ndarray) -> np.ndarray:
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def test_a_fitted_tilt_brings_the_mean_softmax_of_every_block_to_its_goal():
    """Rows of logits far from the goals (a bucket of a 3-code and a padded 2-code block):
    after the tilt, each block's softmax averaged over the rows is its goal, and the padding
    stays out of reach."""
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((500, 2, 3)) * 2 + np.array([[3.0, 0.0, -1.5], [0.0, 2.0, 0.0]])
    logits[:, 1, 2] = -math.inf  # the second block has 2 codes
    goal = np.array([[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]])
    untilted = softmax(logits).mean(0)
    assert np.abs(untilted - goal).sum(-1).max() > 0.5  # the check can fail
    tilt = fit_tilt(logits, goal)
    tilted = softmax(logits + tilt).mean(0)
    np.testing.assert_allclose(tilted, goal, atol=2 * TILT_TOLERANCE, rtol=0)
    assert tilt[1, 2] == 0.0


def test_a_code_the_logits_cannot_reach_is_lifted_at_most_the_limit():
    logits = np.broadcast_to(np.array([[[0.0, -140.0]]]), (10, 1, 2))  # code 1: e^-140 of code 0
    tilt = fit_tilt(logits, np.array([[0.5, 0.5]]))
    assert np.abs(tilt).max() <= TILT_LIMIT and np.isfinite(tilt).all()


def test_a_tilt_goal_is_a_distribution_with_every_code_alive():
    goal = tilt_goal(np.array([0.7, 0.0, 0.5, -0.2]), np.full(4, 0.25), 0.0)
    assert goal.sum() == pytest.approx(1.0) and (goal > 0).all()
    np.testing.assert_allclose(goal[[0, 2]] / goal[[0, 2]].sum(), [0.7 / 1.2, 0.5 / 1.2], 1e-3)


def test_a_tilt_goal_keeps_gs_own_share_where_the_release_is_within_its_noise():
    """Cell by cell: a difference from G's own share well above the noise's standard
    deviation moves the goal to the release, one within it leaves G's share, and a code that
    both call empty is not lifted to the floor."""
    own = np.array([0.5, 0.3, 0.2])
    released = np.array([0.51, 0.09, 0.40])  # cell 0 within the noise, cells 1-2 far above
    goal = tilt_goal(released, own, variance=0.02**2)
    assert goal[0] == pytest.approx(0.5, abs=0.02)
    assert goal[1] < 0.12 and goal[2] > 0.37
    np.testing.assert_allclose(tilt_goal(released, own, variance=1.0), own, atol=2e-3)
    np.testing.assert_allclose(tilt_goal(released, own, variance=0.0), released, atol=2e-3)
    empty = tilt_goal(np.array([0.6, 0.4, 0.0]), np.array([0.6, 0.4, 1e-9]), variance=1e-4)
    assert empty[2] < 1e-8


def test_tilted_sampling_draws_each_classes_released_column_distributions():
    """A random generator, and released per-class distributions far from its own: rows
    sampled with each class's tilt follow that class's release (the untilted rows do not),
    the tilt fitted on other latent draws than the rows'."""
    torch.manual_seed(1)
    spans = (Span(0, 3), Span(3, 5))
    generator = FrozenGenerator.of(Generator(4, 2, [8], spans, width=5))
    by_class = [
        np.array([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]]),
        np.array([[0.9, 0.1], [0.25, 0.75]]),
    ]
    released = Marginals(by_class, [], [], [np.arange(3), np.arange(2)])
    tilts = class_tilts(generator, released, [0.0, 0.0], 4000, np.random.default_rng(1))
    n = 40_000
    rng = np.random.default_rng(2)
    for label in (0, 1):
        z = rng.standard_normal((n, 4), dtype=np.float32)
        y = np.eye(2, dtype=np.float32)[np.full(n, label)]
        codes = generator.sample_codes(z, y, rng, tilts[label])
        untilted = generator.sample_codes(z, y, rng)
        for column, table in enumerate(by_class):
            goal = (1 - RAKING_FLOOR) * table[label] + RAKING_FLOOR / 3
            goal = goal / goal.sum()
            drawn = np.bincount(codes[:, column], minlength=len(goal)) / n
            np.testing.assert_allclose(drawn, goal, atol=0.015, rtol=0)
            own = np.bincount(untilted[:, column], minlength=len(goal)) / n
            assert np.abs(own - goal).max() > 0.05


def test_a_release_drowned_in_its_noise_leaves_the_generator_untilted():
    torch.manual_seed(0)
    generator = FrozenGenerator.of(Generator(4, 2, [8], (Span(0, 3),), width=3))
    released = Marginals([np.array([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])], [], [], [np.arange(3)])
    noisy, exact = class_tilts(generator, released, [1.0, 0.0], 4000, np.random.default_rng(1))
    assert np.abs(noisy[0]).max() < 0.01  # (what is left of the fit's tolerance)
    assert np.abs(exact[0]).max() > 0.5


def test_the_tilts_noise_limit_is_derived_from_adults_validation_rounds_alone():
    """TILT_NOISE_LIMIT is what scripts/tuning/derive_tilt_limit.py's rule gives on the committed
    Adult-only figures (no cervical, credit-card or test-split number is read)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from tuning import derive_tilt_limit

    cells = derive_tilt_limit.load()
    assert derive_tilt_limit.derived_limit(cells) == sampler.TILT_NOISE_LIMIT
    assert cells["tilt_helped"].any() and not cells["tilt_helped"].all()


def test_raking_narrow_cells_pick_the_rows_wide_cells_pick(monkeypatch):
    """Raking keeps a pool's cells in the narrowest integers its tables fit (int8 here): the
    same rows kept as with int64 cells."""
    rng = np.random.default_rng(5)
    codes = skewed_pool(rng, 3000)
    labels = rng.integers(0, 2, size=3000)
    by_class = [np.stack([TARGETS[c], TARGETS[c][::-1]]) for c in range(2)]
    maps = [np.arange(3), np.array([0, 0, 1, 1])]
    joint = np.array([[0.4, 0.0], [0.2, 0.1], [0.0, 0.3]])
    released = Marginals(by_class, [(0, 1)], [joint], maps)
    raker = Raker(released, np.array([0.5, 0.5]))
    narrow = raker(codes, labels, 1000, np.random.default_rng(6))
    assert raker.cells is not None and raker.cells.dtype == np.int8
    monkeypatch.setattr(postprocess, "cell_type", lambda _: np.dtype(np.int64))
    wide = Raker(released, np.array([0.5, 0.5]))
    assert np.array_equal(wide(codes, labels, 1000, np.random.default_rng(6)), narrow)
    assert wide.cells is not None and wide.cells.dtype == np.int64
