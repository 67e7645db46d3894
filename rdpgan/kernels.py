"""Sampling's compiled loops (numba): what numpy would run as several passes over arrays of
megabytes, each read once here.

A generator pass spends most of its time in G's matrix products (BLAS); the rest is
LayerNorm, exp and the inverse-transform draw of each block's code. As numpy calls these were a
dozen passes over the pass's arrays and a product with an upper triangle per block for the
cumulative sums. In an ad hoc profile (not committed) of one pass of 4,096 rows of Adult's
generator on the AVX2-capped EPYC, they took about 5 ms of 20, and take about 1 ms here;
raking a pool of 524,288 rows took 0.24 s of numpy passes (bincount, gather, multiply), and
takes 0.11 s here (:func:`rescale_and_count`). What counts is the whole command:
scripts/bench/bench_sampling.py, results/speed.md.

The loops are written so that LLVM vectorises them: each inner loop runs over a contiguous
slice with its own loop index, and exp is a polynomial (numba has no vector exp of its own).
Compiled at the first call and cached beside this file (numba's cache, keyed by the CPU).
"""

from __future__ import annotations

import numba
import numpy as np

# Rows a draw works on at once: each block's cells for these rows stay in the second-level
# cache across the draw's three sweeps (a block of 99 codes: 99 · 256 floats, 100 kB).
DRAW_ROWS = 256
# exp(x) for x <= 0 in float32: x = n ln 2 + t, |t| <= ln(2) / 2, exp(t) by Cephes' expf
# polynomial, 2^n from its exponent bits: within a relative 2e-7 of the exact exp over
# [-87, 0] (tests/test_kernels.py). Below EXP_LOWEST, exp is taken at EXP_LOWEST (1.6e-38,
# near float32's smallest normal number): against the block's largest, whose exp is 1, nothing.
EXP_LOWEST = np.float32(-87.0)
_LOG2E = np.float32(1.4426950408889634)
_LN2_HIGH = np.float32(0.693359375)
_LN2_LOW = np.float32(-2.12194440e-4)
_EXP_POLYNOMIAL = tuple(
    np.float32(c)
    for c in (
        1.9875691500e-4,
        1.3981999507e-3,
        8.3334519073e-3,
        4.1665795894e-2,
        1.6666665459e-1,
        5.0000001201e-1,
    )
)
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
_ZERO = np.float32(0.0)
_C0, _C1, _C2, _C3, _C4, _C5 = _EXP_POLYNOMIAL
# The exp and the draw vectorise across rows (no sum across lanes), so they need none of
# fastmath's reassociation, which would let LLVM fold the two parts of ln 2 back into one, nor
# its no-NaN and no-infinity promises; LayerNorm's sum of squares needs reassociation to
# vectorise, and takes all of fastmath.
ROW_WISE = {"nsz", "arcp", "contract", "afn"}


@numba.njit(inline="always", fastmath=ROW_WISE)
def _exp_pieces(x: np.float32) -> tuple[np.float32, np.int32]:
    """exp(x) for x <= 0 as (exp(t), the float32 bits of 2^n), x = n ln 2 + t: the product of
    the two, the second read through a float32 view of int32 scratch (numba has no scalar
    bit cast), is exp(x)."""
    v = max(x, EXP_LOWEST)
    n = np.int32(v * _LOG2E - _HALF)  # round(v log2 e), ties down (v <= 0)
    whole = np.float32(n)
    t = v - whole * _LN2_HIGH - whole * _LN2_LOW
    p = ((((_C0 * t + _C1) * t + _C2) * t + _C3) * t + _C4) * t + _C5
    return p * t * t + t + _ONE, (n + np.int32(127)) << np.int32(23)


@numba.njit(nogil=True, fastmath=ROW_WISE, cache=True)
def exp_nonpositive(x: np.ndarray, out: np.ndarray, exponent: np.ndarray) -> None:
    """``out[i] = exp(x[i])`` for ``x[i] <= 0`` (1-d float32 arrays, ``exponent`` int32
    scratch of the same length): the draw's exp, on its own so that tests can hold it against
    numpy's."""
    scale = exponent.view(np.float32)
    for i in range(x.shape[0]):
        out[i], exponent[i] = _exp_pieces(x[i])
    for i in range(x.shape[0]):
        out[i] *= scale[i]


@numba.njit(nogil=True, fastmath=True, cache=True)
def layer_norm(h: np.ndarray, lower: np.ndarray, divisor: np.float32, eps: np.float32) -> None:
    """In place, each row of ``h`` ([rows, units] float32, its mean already zero) scaled by
    1 / sqrt(its sum of squares / ``divisor`` + ``eps``), then raised to ``lower`` (the folded
    layer of :func:`rdpgan.frozen._folded`): one read and one write of the row."""
    units = h.shape[1]
    for r in range(h.shape[0]):
        row = h[r]
        squares = _ZERO
        for k in range(units):
            squares += row[k] * row[k]
        scale = _ONE / np.sqrt(squares / divisor + eps)
        for k in range(units):
            row[k] = max(row[k] * scale, lower[k])


@numba.njit(nogil=True, fastmath=ROW_WISE, cache=True)
def draw_codes(
    logits: np.ndarray,
    uniforms: np.ndarray,
    starts: np.ndarray,
    widths: np.ndarray,
    destinations: np.ndarray,
    codes: np.ndarray,
) -> None:
    """One code per block and row, drawn from the softmax of the block's logits by inverse
    transform. ``logits``: [cells, rows] float32 (a block's cells start at ``starts[b]``,
    ``widths[b]`` of them; overwritten with their exp); ``uniforms``: [blocks, rows] in
    [0, 1); the code is written to ``codes[destinations[b]]`` ([blocks, rows] int64).

    Per block and row: its largest logit m, the sum S of exp(x - m) over its cells, and the
    code is the first whose running sum (in the order S was summed) exceeds u · S. For u < 1
    that is one of the block's codes where the running sum ends at S to the bit (u · S < S);
    the code is capped at the block's last all the same, so that no uniform, and no compiler
    that sums the two otherwise, can write a code past it. Shifting by m keeps every exp
    within (0, 1] and S >= 1: nothing overflows or underflows. ValueError for a layout that
    does not fit the arrays (numba checks no index).
    """
    cells, rows = logits.shape
    blocks = starts.shape[0]
    if widths.shape[0] != blocks or destinations.shape[0] != blocks:
        raise ValueError("the blocks' starts, widths and destinations differ in number")
    if uniforms.shape != (blocks, rows) or codes.shape != (blocks, rows):
        raise ValueError("the uniforms or codes do not match the blocks and rows")
    written = np.zeros(blocks, np.bool_)
    for b in range(blocks):
        if widths[b] < 1 or starts[b] < 0 or starts[b] + widths[b] > cells:
            raise ValueError("a block's cells lie outside the logits")
        if not 0 <= destinations[b] < blocks or written[destinations[b]]:
            raise ValueError("the blocks' destinations are not one each of the codes' rows")
        written[destinations[b]] = True
    top = np.empty(DRAW_ROWS, np.float32)
    total = np.empty(DRAW_ROWS, np.float32)
    running = np.empty(DRAW_ROWS, np.float32)
    target = np.empty(DRAW_ROWS, np.float32)
    passed = np.empty(DRAW_ROWS, np.int64)
    exps = np.empty(DRAW_ROWS, np.float32)
    exponent = np.empty(DRAW_ROWS, np.int32)
    scale = exponent.view(np.float32)
    for first in range(0, rows, DRAW_ROWS):
        last = min(first + DRAW_ROWS, rows)
        m = last - first
        for b in range(blocks):
            start, width = starts[b], widths[b]
            cell = logits[start, first:last]
            for i in range(m):
                top[i] = cell[i]
            for j in range(1, width):
                cell = logits[start + j, first:last]
                for i in range(m):
                    top[i] = max(top[i], cell[i])
            for i in range(m):
                total[i] = _ZERO
            for j in range(width):
                cell = logits[start + j, first:last]
                for i in range(m):
                    exps[i], exponent[i] = _exp_pieces(cell[i] - top[i])
                for i in range(m):
                    cell[i] = exps[i] * scale[i]
                    total[i] += cell[i]
            draws = uniforms[b, first:last]
            for i in range(m):
                target[i] = draws[i] * total[i]
                running[i] = _ZERO
                passed[i] = 0
            for j in range(width):
                cell = logits[start + j, first:last]
                for i in range(m):
                    running[i] += cell[i]
                    passed[i] += running[i] <= target[i]
            out = codes[destinations[b], first:last]
            for i in range(m):
                out[i] = min(passed[i], width - 1)


@numba.njit(nogil=True, cache=True)
def rescale_and_count(
    weights: np.ndarray,
    cells: np.ndarray,
    ratios: np.ndarray,
    next_cells: np.ndarray,
    next_counts: np.ndarray,
) -> None:
    """One step of raking's sweep (:func:`rdpgan.postprocess.raking_weights`) in one pass over
    the pool: each row's weight times its cell's ratio in this table (``cells``), then added to
    its cell's count in the next table (``next_cells``, into ``next_counts``, zeros). In row
    order, as numpy's bincount adds: the same sums to the last bit. IndexError for a cell
    outside ``ratios`` or ``next_counts`` (numba checks no index)."""
    if cells.shape[0] != weights.shape[0] or next_cells.shape[0] != weights.shape[0]:
        raise ValueError("the weights and the cells differ in rows")
    for i in range(weights.shape[0]):
        cell, next_cell = cells[i], next_cells[i]
        if min(cell, next_cell) < 0 or cell >= ratios.shape[0] or next_cell >= next_counts.shape[0]:
            raise IndexError("a row's cell lies outside its table")
        weights[i] *= ratios[cell]
        next_counts[next_cell] += weights[i]


@numba.njit(nogil=True, cache=True)
def lexicographic_order(keys: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The row indices that sort ``keys`` ([keys, rows]: each row's cell in each of a few
    tables of ``sizes`` cells) by its first key, then its second, and so on, ties in row
    order: numpy's ``lexsort(keys[::-1])``, by a counting sort per key (least significant
    first), a few passes over the rows where lexsort compares. IndexError for a cell outside
    its table."""
    if sizes.shape[0] != keys.shape[0]:
        raise ValueError("a size per key")
    rows = keys.shape[1]
    order = np.arange(rows)
    scratch = np.empty(rows, np.int64)
    for key in range(keys.shape[0] - 1, -1, -1):
        cells, size = keys[key], sizes[key]
        starts = np.zeros(size + 1, np.int64)
        for i in range(rows):
            if not 0 <= cells[i] < size:
                raise IndexError("a row's cell lies outside its table")
            starts[cells[i] + 1] += 1
        for cell in range(size):
            starts[cell + 1] += starts[cell]
        for i in range(rows):
            row = order[i]
            scratch[starts[cells[row]]] = row
            starts[cells[row]] += 1
        order, scratch = scratch, order
    return order


@numba.njit(nogil=True, cache=True)
def herd_picks(
    score: np.ndarray,
    gain: np.ndarray,
    codes: np.ndarray,
    labels: np.ndarray,
    pairs: np.ndarray,
    n: int,
) -> np.ndarray:
    """Kernel herding's ``n`` picks (:func:`rdpgan.postprocess.herd`, whose loop this is):
    each pick the row of largest ``score`` (the first such); then every row loses one for
    each table in which it shares the picked row's cell, the picked row goes out, and ``gain``
    is added to every row. The tables are each column within each class and the joint table
    of each of ``pairs``: ``codes`` [columns, rows], ``labels`` [rows], ``pairs`` [P, 2]
    distinct (i, j), i < j. A row sharing a columns' codes with the picked row shares a
    (class, code) cell in each of them if it is of its class, and the cell of every pair
    among them: so a pick reads each column once, and, with every pair of columns herded,
    no pair at all (a(a - 1)/2 of them). ``score`` is updated in place; ValueError for pairs
    that do not fit (numba checks no index). (Before ``62e0312`` each table took its one off
    in turn: a score's last bit can round otherwise, so a tie to the last bit can part.)"""
    columns, rows = codes.shape
    if labels.shape[0] != rows or score.shape[0] != rows or gain.shape[0] != rows:
        raise ValueError("the scores, gains, codes and labels differ in rows")
    seen = np.zeros((columns, columns), np.bool_)
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        if not 0 <= i < j < columns or seen[i, j]:
            raise ValueError("the pairs are not distinct pairs (i, j), i < j, of the columns")
        seen[i, j] = True
    every_pair = pairs.shape[0] == columns * (columns - 1) // 2
    chosen = np.empty(n, np.int64)
    matches = np.empty((columns, rows), np.int8)
    shared = np.empty(rows, np.int64)
    for m in range(n):
        row = np.argmax(score)
        chosen[m] = row
        for r in range(rows):
            shared[r] = 0
        for i in range(columns):
            code = codes[i, row]
            column, match = codes[i], matches[i]
            for r in range(rows):
                match[r] = column[r] == code
                shared[r] += match[r]
        label = labels[row]
        for r in range(rows):
            together = shared[r]
            shared[r] = together if labels[r] == label else 0
            if every_pair:
                shared[r] += together * (together - 1) // 2
        if not every_pair:
            for p in range(pairs.shape[0]):
                first, second = matches[pairs[p, 0]], matches[pairs[p, 1]]
                for r in range(rows):
                    shared[r] += first[r] & second[r]
        for r in range(rows):
            score[r] -= shared[r]
        score[row] = -np.inf
        for r in range(rows):
            score[r] += gain[r]
    return chosen


def compile_for_sampling() -> None:
    """Compiles every kernel for the array types sampling passes it (raking's cells in each
    integer width :func:`rdpgan.postprocess.cell_type` picks), into numba's cache beside this
    file: scripts/setup.sh calls it, so that the first sampling command after installing loads
    the kernels rather than compiling them (seconds)."""
    f32, i64 = np.float32, np.int64
    layer_norm(np.zeros((1, 2), f32), np.zeros(2, f32), f32(1), f32(1e-5))
    ones = np.ones(1, i64)
    draw_codes(
        np.zeros((1, 1), f32),
        np.zeros((1, 1), f32),
        ones - 1,
        ones,
        ones - 1,
        np.zeros((1, 1), i64),
    )
    for kind in (np.int8, np.int16, np.int32, np.int64):
        cells = np.zeros((1, 1), kind)
        rescale_and_count(np.ones(1), cells[0], np.ones(1), cells[0], np.zeros(1))
        lexicographic_order(cells, ones)
        herd_picks(np.zeros(1), np.zeros(1), cells, ones - 1, np.zeros((0, 2), i64), 1)
