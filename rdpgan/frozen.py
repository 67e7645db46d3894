"""The trained generator as sampling runs it: numpy arrays and numpy draws, no torch.

Sampling needs G's forward pass and one draw per block of codes, nothing of autograd: done in
numpy, a saved model is loaded and sampled without importing torch (a second or two of a
command's start-up), and the products run in float32 through numpy's BLAS, LayerNorm and the
draws in the loops a call chooses (:mod:`rdpgan.loops`).

:class:`CodeLayout` is the one place the blocks of codes are grouped into buckets of similar
width; the torch generator (:class:`rdpgan.models.Generator`) trains on the same layout.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Mapping, Sequence
from itertools import accumulate, pairwise
from statistics import NormalDist
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from rdpgan import numpy_kernels

if TYPE_CHECKING:
    from rdpgan.transform import Span

# Padded cells a bucket of blocks must save to be worth its own layout (a few more small kernels
# a pass). On Adult's blocks, 0 to 64 timed alike; one layout for all was the slowest.
BUCKET_COST = 16
# A LayerNorm gain this small moves its unit by less than GAIN_FLOOR times sqrt(width) (a
# normalised row's entries are at most that): sampling treats it as 0, whose unit is its
# shift's relu alone, rather than dividing the shift by it past float32's range.
GAIN_FLOOR = 1e-30
# torch.nn.LayerNorm's default, which G's body is trained with.
LAYER_NORM_EPS = 1e-5
# Sampling's latent draws take one of this many equally likely points of the normal.
NORMAL_LEVELS = 2**16
# Each thread's reused hidden activations (see _hidden_buffer).
_HIDDEN = threading.local()


@functools.cache
def normal_grid() -> np.ndarray:
    """The midpoints of the standard normal's NORMAL_LEVELS quantiles, (k + 1/2) / levels,
    float32: built once (in milliseconds), without scipy."""
    quantile = NormalDist().inv_cdf
    return np.array([quantile((k + 0.5) / NORMAL_LEVELS) for k in range(NORMAL_LEVELS)], np.float32)


def width_buckets(widths: Sequence[int], cost: int = BUCKET_COST) -> list[list[int]]:
    """Blocks (indices into ``widths``) in buckets of similar width, narrowest first: the
    partition of the sorted widths with the fewest padded cells plus ``cost`` per bucket."""
    order = sorted(range(len(widths)), key=widths.__getitem__)
    best = [0] + [math.inf] * len(order)  # best[j]: the first j blocks in buckets
    cut = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        for start in range(end):
            total = best[start] + (end - start) * widths[order[end - 1]] + cost
            if total < best[end]:
                best[end], cut[end] = total, start
    buckets, end = [], len(order)
    while end > 0:
        buckets.append(order[cut[end] : end])
        end = cut[end]
    return buckets[::-1]


class CodeLayout:
    """The one-hot blocks of an encoding (``spans``: each block's codes, [start, end)) grouped
    into buckets of blocks of similar width: each bucket is one padded [blocks, width] array, so
    the padding stays small (Adult's 14 blocks are 2 to 99 codes wide: one layout would be 1,386
    cells for 413), and a table of 40 columns costs a few array operations, not 40."""

    def __init__(self, spans: Sequence[Span], width: int):
        self.width = width
        widths = [span.end - span.start for span in spans]
        self.buckets = width_buckets(widths)
        self.bucket_shapes = [(len(b), max(widths[j] for j in b)) for b in self.buckets]
        in_bucket_order = [j for bucket in self.buckets for j in bucket]
        # The encoding's index of every code cell, blocks in bucket order.
        cells = [np.arange(spans[j].start, spans[j].end) for j in in_bucket_order]
        self.cells = np.concatenate(cells) if cells else np.zeros(0, dtype=np.int64)
        # Where each block's codes start among the cells (bucket order): argmax + this = cell.
        starts = list(accumulate((widths[j] for j in in_bucket_order), initial=0))
        self.block_offsets = np.asarray(starts[:-1], dtype=np.int64)
        first_blocks = accumulate(map(len, self.buckets), initial=0)
        self.bucket_cells = [(starts[i], starts[j]) for i, j in pairwise(first_blocks)]
        # Each cell's place in its bucket's flattened padded layout.
        in_bucket = [
            np.arange(widths[j]) + slot * bucket_width
            for bucket, (_, bucket_width) in zip(self.buckets, self.bucket_shapes, strict=True)
            for slot, j in enumerate(bucket)
        ]
        self.bucket_index = np.concatenate(in_bucket) if in_bucket else np.zeros(0, np.int64)
        # Codes in span order (block by block, as the transformer lays them out) from cells.
        self.span_cells = np.argsort(self.cells)
        self.bucket_widths = [np.asarray([widths[j] for j in b]) for b in self.buckets]
        # Blocks in span order from blocks in bucket order.
        self.block_order = np.argsort(np.asarray(in_bucket_order, dtype=np.int64))
        # Sampling's head emits each bucket's padded layout directly: the head row of each
        # output, or ``width`` (a zero row with bias -inf) for padding.
        sizes = [math.prod(shape) for shape in self.bucket_shapes]
        rows = np.full(sum(sizes), width)
        offsets = list(accumulate(sizes, initial=0))[:-1]
        for (start, end), offset in zip(self.bucket_cells, offsets, strict=True):
            rows[offset + self.bucket_index[start:end]] = self.cells[start:end]
        self.sampling_rows = rows
        # Sampling's draw (draw_codes, rdpgan.loops), blocks in bucket order: each block's
        # first cell in the head's padded outputs, its own cells (its padding aside), and its
        # place among the codes (span order).
        self.draw_starts = np.asarray(
            [
                offset + slot * bucket_width
                for (count, bucket_width), offset in zip(self.bucket_shapes, offsets, strict=True)
                for slot in range(count)
            ],
            np.int64,
        )
        self.draw_widths = np.asarray([widths[j] for j in in_bucket_order], np.int64)
        self.draw_destinations = np.asarray(in_bucket_order, np.int64)

    def bucket_layout(self, per_block: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Per-code values of each block (span order) laid out as the buckets, [blocks, width]
        each, 0 on padding."""
        layout = []
        for bucket, shape in zip(self.buckets, self.bucket_shapes, strict=True):
            cells = np.zeros(shape)
            for slot, block in enumerate(bucket):
                cells[slot, : len(per_block[block])] = per_block[block]
            layout.append(cells)
        return layout

    def block_values(self, layout: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The inverse of :meth:`bucket_layout`: each block's per-code values, span order."""
        per_block: dict[int, np.ndarray] = {}
        for bucket, cells, widths in zip(self.buckets, layout, self.bucket_widths, strict=True):
            for slot, (block, width) in enumerate(zip(bucket, widths.tolist(), strict=True)):
                per_block[block] = cells[slot, :width]
        return [per_block[block] for block in range(len(per_block))]


def weights_of(generator: Any) -> dict[str, np.ndarray]:
    """A trained torch generator's (:class:`rdpgan.models.Generator`) weights as arrays (views
    of its tensors on the CPU): what ``model.npz`` holds."""
    return {k: v.detach().cpu().numpy() for k, v in generator.state_dict().items()}


def _floats(array: np.ndarray) -> np.ndarray:
    """``array`` as a float32 copy, apart from the tensor it may view (ValueError: not real
    numbers, or not finite)."""
    if array.dtype.kind not in "fiu" or not np.isfinite(array).all():
        raise ValueError("the generator's weights are not finite real numbers")
    return np.array(array, dtype=np.float32)


def _hidden_buffer(layer: int, shape: tuple[int, int]) -> np.ndarray:
    """This thread's float32 array for hidden layer ``layer``'s activations (the head's, one
    past the last, in :meth:`FrozenGenerator.sample_codes`), reused from one pass to the next:
    a fresh one every pass costs its pages' first touch, about a fifth of a pass's time on
    Adult's generator. Only :meth:`FrozenGenerator._body` writes the hidden ones, and
    :meth:`FrozenGenerator.sample_codes` the head's (its logits, then their exp, in place); no
    array :meth:`FrozenGenerator.outputs` or :meth:`FrozenGenerator.sample_codes` returns is
    one of these."""
    buffers = _HIDDEN.__dict__.setdefault("buffers", {})
    buffer = buffers.get(layer)
    if buffer is None or buffer.shape != shape:
        buffer = buffers[layer] = np.empty(shape, np.float32)
    return buffer


def _centred(array: np.ndarray) -> np.ndarray:
    """``array`` (float64) less its mean over the last axis (a Linear's outputs)."""
    return array - array.mean(axis=-1, keepdims=True)


def _fed(
    weight: np.ndarray, bias: np.ndarray, scale: np.ndarray | None, carried: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """A Linear's ([in, out] weight, bias) (float64) fed by a folded layer's outputs ``m``
    rather than its activations ``scale · m + carried`` (:func:`_folded`): the same
    pre-activations, the activations' scale on the weight's rows, their offset in the bias."""
    if scale is None or carried is None:  # fed by [z, y]
        return weight, bias
    return scale[:, None] * weight, bias + carried @ weight


def _folded(
    layers: Sequence[tuple[np.ndarray, ...]], head_weight: np.ndarray, head_bias: np.ndarray
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """G's body ([in, out] weight, bias, LayerNorm gain and shift per layer) and head ([in,
    out], bias) as sampling runs them: per layer one float32 matrix and one lower bound, then
    the head's matrix, each with the bias as its last row (every input carries a last column
    of ones), so that a layer costs a product, its variance, one scale and one maximum.

    Each unit j of a layer, of pre-activation h (LayerNorm's scale s per row), is
    relu(s h g + b) = |g| · max(s σ h, -b / |g|) + b, σ the sign of g: the layer emits
    m = max(s σ h, lower) alone, and the next product takes the |g| on its weight's rows and
    the b on its bias (a unit of gain 0 is relu(b): all in the bias). σ flips the unit's
    weights, which leaves its square, hence the variance, alone. Each weight is centred over
    its outputs (the mean LayerNorm would subtract is then zero), and each layer's matrix has
    one more output, all zeros, that the lower bound 1 turns into the next input's ones. A
    gain of at most GAIN_FLOOR counts as 0."""
    folded, scale, carried = [], None, None
    for weight, bias, gain, shift in ([np.asarray(a, np.float64) for a in x] for x in layers):
        weight, bias = _fed(weight, bias, scale, carried)
        sign = np.where(gain < 0, -1.0, 1.0)
        matrix = np.zeros((weight.shape[0] + 1, weight.shape[1] + 1))
        matrix[:-1, :-1] = _centred(weight) * sign
        matrix[-1, :-1] = _centred(bias) * sign
        live = np.abs(gain) > GAIN_FLOOR
        lower = np.where(live, -shift / np.where(live, np.abs(gain), 1.0), 0.0)
        folded.append((_finite32(matrix), _finite32(np.append(lower, 1.0))))
        scale = np.where(live, np.abs(gain), 0.0)
        carried = np.where(live, shift, np.maximum(shift, 0.0))
    weight, bias = _fed(np.asarray(head_weight, np.float64), head_bias, scale, carried)
    return folded, np.vstack([weight, bias])


def _finite32(array: np.ndarray) -> np.ndarray:
    """``array`` in float32 (ValueError: weights so large that folding leaves its range)."""
    narrow = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(narrow).all():
        raise ValueError("the generator's weights are not finite real numbers")
    return narrow


class FrozenGenerator:
    """G(z, y) from its trained weights (``state``: the torch generator's ``state_dict`` as
    arrays), for sampling: the body's Linear, LayerNorm and ReLU layers, then a head that emits
    every bucket's padded code logits (natural log) directly, padding at -inf."""

    def __init__(self, state: Mapping[str, np.ndarray], layout: CodeLayout, n_classes: int):
        self.layout = layout
        self.n_classes = n_classes
        # G's body is [Linear, LayerNorm, ReLU] per hidden layer (rdpgan.models.Generator).
        # Weights transposed once: each product is then rows × [in, out].
        layers: list[tuple[np.ndarray, ...]] = []
        names = ["head.weight", "head.bias"]
        while f"body.{3 * len(layers)}.weight" in state:
            linear, norm = f"body.{3 * len(layers)}", f"body.{3 * len(layers) + 1}"
            layer = [f"{linear}.weight", f"{linear}.bias", f"{norm}.weight", f"{norm}.bias"]
            weight, *vectors = (_floats(state[name]) for name in layer)
            layers.append((weight.T, *vectors))
            names += layer
        if set(state) != set(names):
            raise ValueError("the weights are not those of a generator")
        head_weight, head_bias = _floats(state["head.weight"]), _floats(state["head.bias"])
        _check_shapes(layers, head_weight, head_bias, layout.width)
        # The trained G's products ([in, out] each, the head padded as sampling emits it):
        # what sampling's products cost before folding (scripts/bench/bench_sampling.py).
        rows = layout.sampling_rows
        self.product_shapes = [weight.shape for weight, *_ in layers]
        self.product_shapes.append((head_weight.shape[1], len(rows)))
        self.hidden = [weight.shape[1] for weight, *_ in layers]
        self.layers, head = _folded(layers, head_weight.T, head_bias)
        # The head emits every bucket's padded layout: padding is a zero column of bias -inf.
        padding = np.zeros((len(head), 1), np.float32)
        padding[-1] = -np.inf
        self.head = np.concatenate([_finite32(head), padding], axis=1)[:, rows].copy()
        self.latent_dim = self.product_shapes[0][0] - n_classes

    def latent_draws(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """[rows, latent_dim] float32 draws of the standard normal, each one of its
        NORMAL_LEVELS equally likely quantile midpoints (:func:`normal_grid`): a look-up in a
        table that stays in cache, about a sixth of the time of Box-Muller's float32 log, sqrt,
        cos and sin. G's rows are a smooth function of z and are drawn from its softmaxes, so
        the grid's steps (2e-5 near zero) change nothing measurable; its tails end at 4.32
        standard deviations (the normal's beyond: a share of 1.5e-5 of the draws)."""
        levels = rng.integers(0, NORMAL_LEVELS, (rows, self.latent_dim), dtype=np.uint16)
        return np.take(normal_grid(), levels)

    @classmethod
    def of(cls, generator: Any) -> FrozenGenerator:
        """A trained torch generator (:class:`rdpgan.models.Generator`), frozen."""
        return cls(weights_of(generator), generator.layout, generator.n_classes)

    def outputs(
        self,
        z: np.ndarray,
        y: np.ndarray,
        tilt: Sequence[np.ndarray] | None = None,
    ) -> np.ndarray:
        """[rows, cells]: every bucket's padded code logits for latent draws ``z`` and one-hot
        labels ``y``, each row on its own (LayerNorm normalises a row, never a batch), shifted
        by ``tilt`` (each bucket's [blocks, width], as :mod:`rdpgan.postprocess` fits it; the
        same for every row, so it rides on the head's bias)."""
        return self._body(z, y) @ self._head(tilt)

    def _body(self, z: np.ndarray, y: np.ndarray, loops: ModuleType = numpy_kernels) -> np.ndarray:
        """[rows, units + 1]: the last hidden layer's folded outputs (:func:`_folded`), in this
        thread's buffer; LayerNorm by ``loops`` (:mod:`rdpgan.loops`)."""
        ones = np.ones((len(z), 1), np.float32)
        h = np.concatenate([z, y, ones], axis=1, dtype=np.float32)
        for layer, (matrix, lower) in enumerate(self.layers):
            # Each row's pre-activations, centred (their mean is zero up to rounding), some
            # units' signs flipped, then a zero (see _folded).
            h = np.matmul(h, matrix, out=_hidden_buffer(layer, (len(h), matrix.shape[1])))
            divisor = np.float32(matrix.shape[1] - 1)
            loops.layer_norm(h, lower, divisor, np.float32(LAYER_NORM_EPS))
        return h

    def _head(self, tilt: Sequence[np.ndarray] | None) -> np.ndarray:
        """The head's matrix, ``tilt`` added to its bias row."""
        if not tilt:
            return self.head
        head = self.head.copy()
        head[-1] += np.concatenate([t.ravel() for t in tilt]).astype(np.float32)
        return head

    def code_logits(self, outputs: np.ndarray) -> list[np.ndarray]:
        """Each bucket's code logits of :meth:`outputs`, [rows, blocks, width] (views)."""
        buckets, start = [], 0
        for shape in self.layout.bucket_shapes:
            end = start + math.prod(shape)
            buckets.append(outputs[:, start:end].reshape(len(outputs), *shape))
            start = end
        return buckets

    def sample_codes(
        self,
        z: np.ndarray,
        y: np.ndarray,
        rng: np.random.Generator,
        tilt: Sequence[np.ndarray] | None = None,
        loops: ModuleType = numpy_kernels,
    ) -> np.ndarray:
        """[rows, blocks]: one code per block (span order) of G(z, y), drawn from the softmax of
        its logits (shifted by ``tilt``: rows of one class) by inverse transform
        (``loops.draw_codes``, :mod:`rdpgan.loops`), one uniform draw per block against the
        block's cumulative sums: the distribution of the argmax of Gumbel-perturbed logits that
        training's hard samples take, with one draw per block instead of one per code.

        The head's product is taken transposed ([cells, rows]: the same product, BLAS reading
        its operands the other way), so that the draw runs over each cell's rows, contiguous.
        """
        rows, layout = len(z), self.layout
        blocks = len(layout.draw_widths)
        if not blocks:  # a table without feature columns
            return np.zeros((rows, 0), dtype=np.int64)
        uniforms = rng.random((blocks, rows), dtype=np.float32)
        head = self._head(tilt)
        # (The head's outputs are this thread's, reused; the draw overwrites them.)
        logits = _hidden_buffer(len(self.layers), (head.shape[1], rows))
        np.matmul(head.T, self._body(z, y, loops).T, out=logits)
        codes = np.empty((blocks, rows), dtype=np.int64)
        loops.draw_codes(
            logits,
            uniforms,
            layout.draw_starts,
            layout.draw_widths,
            layout.draw_destinations,
            codes,
        )
        return codes.T


def _check_shapes(
    layers: Sequence[tuple[np.ndarray, ...]],
    head_weight: np.ndarray,
    head_bias: np.ndarray,
    width: int,
) -> None:
    """ValueError unless the layers ([in, out] weights, then [out] bias, gain and shift) chain
    into a head of ``width`` outputs: weights of another model fail when loaded, not when
    sampled."""
    if any(weight.ndim != 2 for weight, *_ in layers) or head_weight.ndim != 2:
        raise ValueError("the generator's weights are not matrices")
    fan_ins = [weight.shape[0] for weight, *_ in layers] + [head_weight.shape[1]]
    for (weight, *vectors), fan_in in zip(layers, fan_ins[1:], strict=True):
        if weight.shape[1] != fan_in or any(vector.shape != (fan_in,) for vector in vectors):
            raise ValueError("the generator's layers do not chain")
    if head_weight.shape[0] != width or head_bias.shape != (width,):
        raise ValueError("the generator's head does not fit the table's encoding")
