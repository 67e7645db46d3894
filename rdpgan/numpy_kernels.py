"""Sampling's loops as numpy passes: the twins of :mod:`rdpgan.kernels`, for calls too small
to repay numba's start (:mod:`rdpgan.loops` chooses).

Same signatures, same refusals. Raking's step, the lexicographic order and herding's picks
give the compiled loops' numbers to the bit; LayerNorm and the draw agree up to float32
rounding (numpy's exp and sums against the kernels' polynomial exp and fused loops), so a
draw near a cumulative sum's edge can part.
"""

from __future__ import annotations

import numpy as np


def layer_norm(h: np.ndarray, lower: np.ndarray, divisor: np.float32, eps: np.float32) -> None:
    """:func:`rdpgan.kernels.layer_norm`: in place, each row of ``h`` (its mean already zero)
    scaled by 1 / sqrt(its sum of squares / ``divisor`` + ``eps``), then raised to ``lower``."""
    squares = np.einsum("ij,ij->i", h, h)
    np.multiply(h, (np.float32(1.0) / np.sqrt(squares / divisor + eps))[:, None], out=h)
    np.maximum(h, lower, out=h)


def draw_codes(
    logits: np.ndarray,
    uniforms: np.ndarray,
    starts: np.ndarray,
    widths: np.ndarray,
    destinations: np.ndarray,
    codes: np.ndarray,
) -> None:
    """:func:`rdpgan.kernels.draw_codes`: per block and row, the first code whose running sum
    of exp(logit - the block's largest) exceeds the uniform times their total, capped at the
    block's last. ``logits`` [cells, rows] are overwritten (with the running sums)."""
    cells, rows = logits.shape
    blocks = len(starts)
    if len(widths) != blocks or len(destinations) != blocks:
        raise ValueError("the blocks' starts, widths and destinations differ in number")
    if uniforms.shape != (blocks, rows) or codes.shape != (blocks, rows):
        raise ValueError("the uniforms or codes do not match the blocks and rows")
    ends = starts.astype(np.int64) + widths  # (in int64, as the compiled loop compares)
    if blocks and (np.min(widths) < 1 or np.min(starts) < 0 or np.max(ends) > cells):
        raise ValueError("a block's cells lie outside the logits")
    if sorted(destinations.tolist()) != list(range(blocks)):
        raise ValueError("the blocks' destinations are not one each of the codes' rows")
    for start, width, uniform, destination in zip(
        starts.tolist(), widths.tolist(), uniforms, destinations.tolist(), strict=True
    ):
        block = logits[start : start + width]
        block -= block.max(axis=0)
        np.exp(block, out=block)
        for cell in range(1, width):  # the running sums, cell after cell: numpy's cumsum
            np.add(block[cell - 1], block[cell], out=block[cell])  # down axis 0 is 20x slower
        passed = (block <= uniform * block[-1]).sum(axis=0)
        np.minimum(passed, width - 1, out=codes[destination])


def _check_cells(cells: np.ndarray, size: int) -> None:
    """IndexError for a cell outside a table of ``size`` cells (numpy's indexing would wrap a
    negative one)."""
    if len(cells) and (cells.min() < 0 or cells.max() >= size):
        raise IndexError("a row's cell lies outside its table")


def rescale_and_count(
    weights: np.ndarray,
    cells: np.ndarray,
    ratios: np.ndarray,
    next_cells: np.ndarray,
    next_counts: np.ndarray,
) -> None:
    """:func:`rdpgan.kernels.rescale_and_count`: each row's weight times its cell's ratio,
    then added to its cell's count in the next table."""
    if len(cells) != len(weights) or len(next_cells) != len(weights):
        raise ValueError("the weights and the cells differ in rows")
    _check_cells(cells, len(ratios))
    _check_cells(next_cells, len(next_counts))
    weights *= ratios[cells]
    next_counts += np.bincount(next_cells, weights=weights, minlength=len(next_counts))


def lexicographic_order(keys: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """:func:`rdpgan.kernels.lexicographic_order`: numpy's lexsort, first key first."""
    if len(sizes) != len(keys):
        raise ValueError("a size per key")
    for cells, size in zip(keys, sizes.tolist(), strict=True):
        _check_cells(cells, size)
    return np.lexsort(keys[::-1]) if len(keys) else np.arange(keys.shape[1])


def herd_picks(
    score: np.ndarray,
    gain: np.ndarray,
    codes: np.ndarray,
    labels: np.ndarray,
    pairs: np.ndarray,
    n: int,
) -> np.ndarray:
    """:func:`rdpgan.kernels.herd_picks`: ``n`` times, the row of largest ``score`` (the
    first such), one off every row for each table in which it shares a cell with it (each
    column within each class, each of ``pairs``), the row out, ``gain`` added."""
    columns, rows = codes.shape
    if len(labels) != rows or len(score) != rows or len(gain) != rows:
        raise ValueError("the scores, gains, codes and labels differ in rows")
    listed = [(int(i), int(j)) for i, j in pairs.reshape(-1, 2)]
    if len(set(listed)) != len(listed) or not all(0 <= i < j < columns for i, j in listed):
        raise ValueError("the pairs are not distinct pairs (i, j), i < j, of the columns")
    every_pair = len(listed) == columns * (columns - 1) // 2
    chosen = np.empty(n, np.int64)
    for m in range(n):
        row = int(np.argmax(score))
        chosen[m] = row
        matches = codes == codes[:, row : row + 1]
        together = matches.sum(axis=0, dtype=np.int64)
        shared = np.where(labels == labels[row], together, 0)
        if every_pair:
            shared += together * (together - 1) // 2
        else:
            for i, j in listed:
                shared += matches[i] & matches[j]
        score -= shared
        score[row] = -np.inf
        score += gain
    return chosen
