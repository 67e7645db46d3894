"""Tilting, raking and herding: sample rows whose marginals match the released ones, or G's own
(free).

The generator's rows come close to the released marginals
(:func:`rdpgan.measure.release_marginals`) but not onto them; a GAN's marginals drift by a few
points, which is most of what a person sees when comparing tables. Two remedies, which combine:

- **Tilting** shifts each code's logit, per class, by a constant fitted so that G's expected
  code distribution of every column within every class is the released one (over a fixed set
  of latent draws, by iterative scaling): the rows are drawn as fast as before, and each
  column's distribution given the class is matched in expectation. Pairs are left to G.
- **Raking**: given a pool of generated rows, iterative proportional fitting finds weights
  under which every released table (each column within each class, each chosen pair) is matched
  as far as the pool's codes allow, and systematic resampling then draws the rows to keep with
  those weights, in code order so that rounding does not add sampling noise of its own.

Where the released marginals are too noisy to rake toward, **herding** (:func:`herd`) picks
rows from a pool of G's own instead, so that each column's distribution within each class
follows the pool's: it removes the scatter of rows drawn one by one, and matches nothing
released.

Only released statistics and G's outputs are used, so this is post-processing: it costs no
privacy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType

import numpy as np

from rdpgan import numpy_kernels
from rdpgan.data.discretize import cell_index
from rdpgan.frozen import FrozenGenerator
from rdpgan.marginals import Marginals, shrink_toward

#: Most IPF sweeps over the tables; the weights settle within a few dozen on real tables.
RAKING_SWEEPS = 30
#: Stop once a sweep brings the furthest table less than this share closer to its goal: the
#: (noisy, so not quite consistent) released tables then pull against each other, and more
#: sweeps only trade one table's error for another's.
RAKING_STALL = 0.001
#: Tables the pool is sorted by before systematic resampling: the first few gain most; a
#: sort by all of them costs more than the raking itself.
SORTED_TABLES = 4
#: Share of each target spread evenly over the cells the pool reaches (see raking_weights),
#: and over each block's codes when tilting.
RAKING_FLOOR = 1e-3
#: Most sweeps when fitting a tilt, and the total variation (per block, against its goal) at
#: which it stops: far below the sampling noise of any table that is sampled.
TILT_SWEEPS = 200
TILT_TOLERANCE = 1e-4
#: Largest shift of one code's logit: a code G hardly ever draws is lifted at most 2^16-fold,
#: rather than without bound toward a goal G cannot reach.
TILT_LIMIT = 16.0 * math.log(2.0)


def tilt_goal(released: np.ndarray, own: np.ndarray, variance: float) -> np.ndarray:
    """A block's goal for the tilt: its released code distribution, with RAKING_FLOOR spread
    evenly over its codes (so that no code is tilted out of reach), then shrunk toward G's
    ``own`` cell by cell where the two differ by no more than the release's noise
    (``variance`` per cell, in probability units, :func:`rdpgan.marginals.shrink_toward`): G is
    not tilted toward the noise of a small class or a small ε, nor, where the noise's standard
    deviation is at least the floor's share of a code, are codes that both call empty lifted
    to the floor."""
    goal = np.clip(released, 0.0, None)
    total = goal.sum()
    goal = goal / total if total > 0 else np.full(len(goal), 1.0 / len(goal))
    goal = (1 - RAKING_FLOOR) * goal + RAKING_FLOOR / len(goal)
    return shrink_toward(own, goal, np.asarray(variance))


def fit_tilt(logits: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """The shift of each code's logit under which the mean over rows of each block's softmax
    is ``goal``: ``logits`` is [rows, blocks, width] (-inf on padding), ``goal`` [blocks,
    width] (0 on padding).

    Iterative scaling (Darroch and Ratcliff's, every row drawing exactly one code a block):
    each sweep multiplies every code's probability in every row by goal / current mean, before
    each block is renormalised; it converges to the goal where the codes can reach it. A row's
    softmax under a shift t is exp(logits) · exp(t) over its block's total, so exp(logits) is
    taken once and each sweep is two passes over it.
    """
    return _fit_tilt(_block_weights(logits), goal)


def _fit_tilt(weights: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """:func:`fit_tilt` from the logits' :func:`_block_weights`."""
    rows = len(weights)
    tilt = np.zeros_like(goal)
    live = goal > 0
    for _ in range(TILT_SWEEPS):
        scale = np.exp(tilt)
        totals = np.einsum("rbw,bw->rb", weights, scale)
        current = scale * np.einsum("rbw,rb->bw", weights, 1.0 / totals) / rows
        if float(np.abs(goal - current).sum(axis=-1).max()) / 2 < TILT_TOLERANCE:
            break
        # (Padding and codes the goal empties keep no shift.)
        ratio = np.where(live, goal / np.maximum(current, np.finfo(current.dtype).tiny), 1.0)
        tilt = np.clip(tilt + np.log(ratio), -TILT_LIMIT, TILT_LIMIT)
    return tilt


def class_tilts(
    generator: FrozenGenerator,
    released: Marginals,
    variance: Sequence[float],
    rows: int,
    rng: np.random.Generator,
) -> list[list[np.ndarray]]:
    """Per class, each bucket's tilt (:func:`fit_tilt`, in
    :meth:`~rdpgan.frozen.FrozenGenerator.code_logits`' layout) toward the released code
    distributions of every column within that class (each shrunk toward G's own by the noise
    ``variance`` of one of the class's cells, see :func:`tilt_goal`), fitted on ``rows``
    latent draws of the class from ``rng``."""
    layout = generator.layout
    tilts = []
    for label in range(generator.n_classes):
        z = generator.latent_draws(rng, rows)
        y = np.zeros((rows, generator.n_classes), np.float32)
        y[:, label] = 1.0
        weights = [_block_weights(b) for b in generator.code_logits(generator.outputs(z, y))]
        own = layout.block_values([_mean_softmax(bucket) for bucket in weights])
        goals = [
            tilt_goal(table[label], mine, variance[label])
            for table, mine in zip(released.by_class, own, strict=True)
        ]
        layout_goals = layout.bucket_layout(goals)
        tilts.append([_fit_tilt(w, g) for w, g in zip(weights, layout_goals, strict=True)])
    return tilts


def _block_weights(logits: np.ndarray) -> np.ndarray:
    """exp(``logits``) ([rows, blocks, width]), each block shifted by its largest logit (no
    overflow, nor underflow of a whole block), in float64: each block's softmax up to its
    total."""
    return np.exp(logits - logits.max(axis=-1, keepdims=True), dtype=np.float64)


def _mean_softmax(weights: np.ndarray) -> np.ndarray:
    """[blocks, width]: each block's softmax (from its :func:`_block_weights`) averaged over
    the rows: G's expected code distribution over those rows."""
    return (weights / weights.sum(axis=-1, keepdims=True)).mean(axis=0)


def raking_weights(
    cells: np.ndarray,
    targets: Sequence[np.ndarray],
    sweeps: int = RAKING_SWEEPS,
    settle: int = 0,
    loops: ModuleType = numpy_kernels,
) -> np.ndarray:
    """Weights (summing to 1) under which table t's weighted distribution is ``targets[t]``,
    where the pool's cells allow. ``cells`` is [tables, rows]: row i lies in cell
    ``cells[t, i]`` of table t (one contiguous array per table, read again every sweep).
    ``loops``: :mod:`rdpgan.loops`.

    The last ``settle`` tables then have the final say: once the sweeps over every table
    stall (noisy tables pull against each other), they are swept alone from those weights, so
    the weights meet them (where they agree with each other, as the per-class columns and the
    class shares do) as closely as the pool allows, moving the rest as little as that needs.
    """
    weights = np.full(cells.shape[1], 1.0 / max(cells.shape[1], 1))
    if not len(cells):
        return weights
    weights = _sweep(weights, cells, targets, sweeps, loops)
    if 0 < settle < len(cells):
        weights = _sweep(weights, cells[-settle:], targets[-settle:], sweeps, loops)
    return weights


def _sweep(
    weights: np.ndarray,
    cells: np.ndarray,
    targets: Sequence[np.ndarray],
    sweeps: int,
    loops: ModuleType,
) -> np.ndarray:
    """IPF from ``weights`` over the tables in order, until a sweep stalls
    (:data:`RAKING_STALL`) or ``sweeps`` are done.

    Each step rescales the rows of one table and counts the next table's cells under the new
    weights in the same pass (``loops.rescale_and_count``): on large pools the passes over
    the rows are what raking costs."""

    def counts(table: int) -> np.ndarray:
        """Table ``table``'s weighted cell counts, as the weights are."""
        return np.bincount(cells[table], weights=weights, minlength=len(targets[table]))

    current = counts(0)
    previous = np.inf
    for _ in range(sweeps):
        furthest = 0.0
        for t, (table, target) in enumerate(zip(cells, targets, strict=True)):
            following = (t + 1) % len(cells)
            # Cells the pool never reached cannot be reached; the rest share their mass. A
            # floor keeps every reachable cell alive: a cell the (noisy) target empties would
            # otherwise zero its rows for good, and no later table could bring them back.
            reachable = current > 0
            goal = np.where(reachable, target, 0.0)
            if goal.sum() <= 0:
                current = counts(following)
                continue
            goal = (
                1 - RAKING_FLOOR
            ) * goal / goal.sum() + RAKING_FLOOR * reachable / reachable.sum()
            furthest = max(furthest, 0.5 * float(np.abs(goal - current).sum()))
            # (A cell's weight can be subnormal; dividing by it must not overflow.)
            ratio = np.where(reachable, goal / np.maximum(current, np.finfo(float).tiny), 0.0)
            # (No renormalising: the goal sums to 1 over the cells the weights reach, so the
            # new weights do too, up to rounding.)
            current = np.zeros(len(targets[following]))
            loops.rescale_and_count(weights, table, ratio, cells[following], current)
        if furthest > (1 - RAKING_STALL) * previous:
            break
        previous = furthest
    return weights


def cell_type(cells: int) -> np.dtype:
    """The narrowest signed integers that number ``cells`` cells, and one more (cell_index's
    running index stays below the table's size, and numpy refuses a factor its integers cannot
    hold): raking's passes read every row's cells dozens of times, and two sampling workers
    share the memory (int16 on Adult, 0.3 GB less at the peak than int64: results/speed.md)."""
    return np.min_scalar_type(-(cells + 1))


def systematic_resample(weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` row indices drawn with probability ``weights``, with the least variance: row i is
    kept floor(n·w_i) or ceil(n·w_i) times, so the drawn table has the weighted marginals up to
    rounding."""
    positions = (rng.random() + np.arange(n)) / n
    cumulative = np.cumsum(weights)
    cumulative[-1] = 1.0
    return np.searchsorted(cumulative, positions, side="right")


def herd(
    codes: np.ndarray,
    labels: np.ndarray,
    code_sizes: Sequence[int],
    n_classes: int,
    n: int,
    pairs: Sequence[tuple[int, int]] = (),
    residual: np.ndarray | None = None,
    loops: ModuleType = numpy_kernels,
) -> np.ndarray:
    """Indices of ``n`` distinct rows of a pool, chosen one at a time by kernel herding (Welling
    2009; Chen, Welling & Smola 2010) on the pool's own tables: each column within each class
    (``codes`` [columns, rows] of ``code_sizes`` codes, ``labels`` [rows] of ``n_classes``) and
    the joint table of each of ``pairs`` of columns. Each pick is the row whose cells the rows
    picked so far fall furthest short of, against the pool's distribution in every table. The
    picked rows then follow the pool in each table to within about a row per cell, where rows
    drawn independently scatter by sqrt(rows × share) per cell: on a table of a thousand rows,
    that scatter is most of the distance between a synthetic and a real table.

    ``residual`` (one entry per cell of all the tables, in order; updated in place) carries
    what earlier picks fell short by into this call: a cell too rare to be picked within one
    pool is picked in a later one, so that over a sample of many pools every cell keeps its
    share (to within a row), rare ones included. ``loops``: :mod:`rdpgan.loops`.

    Row j's shortfall after m picks is its cells' residuals plus (m + 1) × the pool's shares
    of its cells, summed over the tables, less the picks in its cells: kept up to date by
    adding the shares every pick and taking from each row one for every table in which it
    shares the picked row's cell (``loops.herd_picks``).
    """
    columns, rows = codes.shape
    if n > rows:
        raise ValueError("cannot herd more rows than the pool holds")
    shapes = herding_tables(code_sizes, n_classes, pairs)
    cells = np.empty((len(shapes), rows), dtype=np.int64)
    for column in range(columns):
        cell_index([labels, codes[column]], shapes[column], out=cells[column])
    for table, (i, j) in enumerate(pairs, start=columns):
        cell_index([codes[i], codes[j]], shapes[table], out=cells[table])
    sizes = [math.prod(shape) for shape in shapes]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)[:-1]])
    flat = cells + offsets[:, None]  # one numbering of every table's cells
    total = int(sum(sizes))
    shares = np.bincount(flat.ravel(), minlength=total) / rows
    residual = np.zeros(total) if residual is None else residual
    gain = shares[flat].sum(axis=0)
    score = gain + residual[flat].sum(axis=0)
    narrow = cell_type(max(code_sizes, default=1))  # (each pick reads every column's codes)
    chosen = loops.herd_picks(
        score,
        gain,
        np.ascontiguousarray(codes, dtype=narrow),
        np.ascontiguousarray(labels, dtype=np.int64),
        np.array(pairs, dtype=np.int64).reshape(-1, 2),
        n,
    )
    residual += n * shares - np.bincount(flat[:, chosen].ravel(), minlength=total)
    return chosen


def herding_tables(
    code_sizes: Sequence[int], n_classes: int, pairs: Sequence[tuple[int, int]] = ()
) -> list[tuple[int, int]]:
    """The shapes of the tables :func:`herd` follows: (class, code) per column, then (code,
    code) per pair."""
    shapes = [(n_classes, size) for size in code_sizes]
    return shapes + [(code_sizes[i], code_sizes[j]) for i, j in pairs]


class Herder:
    """Picks rows of generated pools that follow the pools themselves: each column's
    distribution within each class and the joint distribution of each of ``pairs`` of columns
    (:func:`herd`), what the picks of one sampling call fall short by carried from each pool to
    the next. Where the released marginals are too noisy to rake toward, this removes the
    noise of drawing rows one by one instead, and matches nothing released (it reads G's rows
    alone). ``loops``: :mod:`rdpgan.loops`."""

    def __init__(
        self,
        code_sizes: Sequence[int],
        n_classes: int,
        pairs: Sequence[tuple[int, int]] = (),
        loops: ModuleType = numpy_kernels,
    ):
        self.loops = loops
        self.code_sizes, self.n_classes = list(code_sizes), n_classes
        self.pairs = list(pairs)
        self.shapes = herding_tables(code_sizes, n_classes, pairs)
        self.residual = np.zeros(sum(math.prod(shape) for shape in self.shapes))

    def __call__(
        self, codes: np.ndarray, labels: np.ndarray, n: int, rng: np.random.Generator
    ) -> np.ndarray:
        """Indices of ``n`` rows of the pool (``codes`` [rows, feature columns], ``labels``),
        in random order (herding picks common rows first)."""
        chosen = herd(
            codes.T,
            labels,
            self.code_sizes,
            self.n_classes,
            n,
            self.pairs,
            self.residual,
            self.loops,
        )
        return rng.permutation(chosen)


class Raker:
    """Picks rows of generated pools whose marginals match the released ones: each (class,
    column) table and each released pair's joint table; with ``only`` (pools of one class),
    that class's column distributions. ``loops``: :mod:`rdpgan.loops`.
    """

    def __init__(
        self,
        released: Marginals,
        label_probs: np.ndarray,
        only: int | None = None,
        loops: ModuleType = numpy_kernels,
    ):
        self.loops = loops
        self.released = released
        self.shares = label_probs / label_probs.sum()
        self.only = only
        self.cells: np.ndarray | None = None

    def __call__(
        self, codes: np.ndarray, labels: np.ndarray, n: int, rng: np.random.Generator
    ) -> np.ndarray:
        """Indices of ``n`` rows of the pool (``codes`` [rows, feature columns], ``labels``),
        in random order.

        The weights meet the released pairs first and the per-class columns (and the class
        shares) last, with the final say (:func:`raking_weights`' ``settle``): a column's
        released distribution is its most precise release, and on wide tables the dozens of
        noisy pair tables swept after the columns pulled them off it (TV16: 1-way TVD 0.024
        raked against 0.004 unraked). The pool is sorted by its cells in the first
        ``SORTED_TABLES`` column tables, so each cell of the first is one contiguous run (kept
        to within one row of its weight), each of the second nearly so, and so on.
        """
        cells, targets = self._tables(codes, labels)
        first = len(targets) - self._column_tables()
        leading = slice(first, first + SORTED_TABLES)
        sizes = np.asarray([len(target) for target in targets[leading]], np.int64)
        order = self.loops.lexicographic_order(cells[leading], sizes)
        weights = raking_weights(cells, targets, settle=len(targets) - first, loops=self.loops)
        weights = weights[order]
        return rng.permutation(order[systematic_resample(weights, n, rng)])

    def _column_tables(self) -> int:
        """The tables after the pairs: one per column, and the class shares' (all classes)."""
        return len(self.released.by_class) + int(self.only is None)

    def _tables(self, codes: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """([tables, rows] cell of each row in each released table, the tables' targets): the
        pairs, then the columns (per class), then the class shares.

        Written straight into one array, each column's codes read contiguously and coarsened
        once however many pairs it is in: on large pools this costs as much as a few sweeps.
        """
        released, shares, only = self.released, self.shares, self.only
        pairs = list(zip(released.pairs, released.joint, strict=True)) if only is None else []
        tables = len(pairs) + self._column_tables()
        sizes = [t.size for t in released.by_class] + [j.size for _, j in pairs] + [len(shares)]
        kind = cell_type(max(sizes))
        if (
            self.cells is None
            or self.cells.shape != (tables, len(labels))
            or self.cells.dtype != kind
        ):
            self.cells = np.empty((tables, len(labels)), dtype=kind)
        cells = self.cells  # reused from pool to pool (fresh pages cost their first touch)
        codes = np.asfortranarray(codes).T  # [column, row] (sampling's pools: as they are)
        targets = []
        coarse = {c: released.maps[c][codes[c]] for pair, _ in pairs for c in pair}
        for t, ((i, j), joint) in enumerate(pairs):
            cell_index([coarse[i], coarse[j]], joint.shape, out=cells[t])
            targets.append(joint.ravel())
        for column, table in enumerate(released.by_class):
            row = len(pairs) + column
            if only is None:
                cell_index([labels, codes[column]], table.shape, out=cells[row])
                targets.append((shares[:, None] * table).ravel())
            else:
                cells[row] = codes[column]
                targets.append(table[only])
        if only is None:
            # Last in every sweep: the class shares are the released ones whatever came before.
            cells[-1] = labels
            targets.append(shares)
        return cells, targets
