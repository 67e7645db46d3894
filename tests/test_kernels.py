"""Sampling's loops, both ways (rdpgan.kernels compiled, rdpgan.numpy_kernels in numpy) against
plain numpy and each other: the same numbers, up to float32 rounding (raking's step, the order
and herding: to the bit), the draw on rows that cross the compiled loop's tiles; the same
refusals. (Which a call runs, rdpgan.loops: tests/test_synthesizer.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from rdpgan import kernels, numpy_kernels

BOTH = pytest.mark.parametrize("impl", [kernels, numpy_kernels], ids=["compiled", "numpy"])


def test_exp_is_within_float32_rounding_of_the_exact_exp():
    x = np.linspace(-87.0, 0.0, 400_001, dtype=np.float32)
    out = np.empty_like(x)
    kernels.exp_nonpositive(x, out, np.empty(len(x), np.int32))
    exact = np.exp(x.astype(np.float64))
    assert np.abs(out / exact - 1).max() < 2e-7
    assert out[-1] == 1.0


def test_exp_below_the_lowest_is_the_lowests():
    """Far below a block's largest logit, a code's weight is exp(-87), not a subnormal or 0:
    nothing beside the largest's 1."""
    x = np.array([-87.0, -88.0, -200.0, -np.inf], np.float32)
    out = np.empty_like(x)
    kernels.exp_nonpositive(x, out, np.empty(len(x), np.int32))
    assert np.all(out == out[0]) and 1e-38 < out[0] < 2e-38


@BOTH
@pytest.mark.parametrize("rows", [1, 300])
def test_layer_norm_matches_numpys(impl, rows):
    rng = np.random.default_rng(0)
    h = rng.normal(size=(rows, 33)).astype(np.float32) * 3
    h -= h.mean(axis=1, keepdims=True)
    lower = rng.normal(size=33).astype(np.float32)
    variance = np.einsum("ij,ij->i", h, h) / np.float32(32)
    expected = np.maximum(h / np.sqrt(variance + np.float32(1e-5))[:, None], lower)
    impl.layer_norm(h, lower, np.float32(32), np.float32(1e-5))
    np.testing.assert_allclose(h, expected, rtol=2e-6, atol=2e-6)


def reference_draw(logits: np.ndarray, uniforms: np.ndarray, widths: list[int]) -> np.ndarray:
    """Each block's first code whose cumulative softmax passes its uniform (float64)."""
    codes, start = [], 0
    for block, width in enumerate(widths):
        weights = np.exp(logits[:, start : start + width].astype(np.float64))
        cumulative = np.cumsum(weights, axis=1)
        passed = cumulative > uniforms[:, block, None] * cumulative[:, -1:]
        codes.append(np.minimum(passed.argmax(axis=1), width - 1))
        start += width
    return np.stack(codes, axis=1)


def draw(impl, widths: list[int], logits: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """[rows, blocks]: draw_codes on ``logits`` ([rows, cells], blocks side by side) laid out
    as sampling lays them out: each block's cells apart from the next's by two cells of padding
    (a logit of 50 that would take over its neighbour's draws if read), blocks written to
    codes in another order than drawn."""
    rows = len(logits)
    padded = np.full((sum(widths) + 2 * len(widths), rows), 50.0, np.float32)
    starts = np.arange(len(widths)) * 2 + np.concatenate([[0], np.cumsum(widths)[:-1]])
    for block, (start, width) in enumerate(zip(starts, widths, strict=True)):
        first = sum(widths[:block])
        padded[start : start + width] = logits[:, first : first + width].T
    destinations = np.roll(np.arange(len(widths)), 1)
    codes = np.full((len(widths), rows), -1, np.int64)
    impl.draw_codes(padded, uniforms.T.copy(), starts, np.array(widths), destinations, codes)
    return codes[destinations].T


@BOTH
def test_draw_codes_is_the_inverse_transform_of_each_blocks_softmax(impl):
    """Rows across two tiles; one block's logits hundreds of nats from the others', up or
    down row by row (each block is shifted by its own largest); against float64 inverse
    transforms of the same uniforms (they may part only where a uniform falls within rounding
    of a cumulative sum)."""
    rng = np.random.default_rng(1)
    widths, rows = [3, 1, 40, 7], kernels.DRAW_ROWS + 45
    logits = rng.normal(scale=4.0, size=(rows, sum(widths))).astype(np.float32)
    logits[:, 4:44] += rng.choice([-200.0, 200.0], size=(rows, 1)).astype(np.float32)
    uniforms = rng.random((rows, len(widths)), dtype=np.float32)
    codes = draw(impl, widths, logits, uniforms)
    assert (codes == reference_draw(logits, uniforms, widths)).mean() > 0.999
    assert np.all(codes[:, 1] == 0)  # the one-code block
    assert np.all((codes >= 0) & (codes < np.array(widths)))


@BOTH
def test_draw_codes_keeps_a_uniform_of_one_on_the_blocks_codes(impl):
    """The draws are below 1, which lands on the block's own codes anyway; a uniform of 1
    (whose u · S is S) still does, by the cap."""
    codes = draw(impl, [4, 2], np.zeros((3, 6), np.float32), np.ones((3, 2), np.float32))
    assert codes.tolist() == [[3, 1]] * 3


@pytest.mark.parametrize(
    "change",
    [
        {"starts": np.array([0, 5])},  # the second block's cells run past the logits
        {"widths": np.array([3, 0])},  # a block without codes
        {"destinations": np.array([0, 2])},  # past the codes
        {"uniforms": np.zeros((2, 5), np.float32)},  # other rows than the logits
    ],
)
@BOTH
def test_draw_codes_refuses_a_layout_that_does_not_fit_its_arrays(impl, change):
    arrays = {
        "logits": np.zeros((6, 4), np.float32),
        "uniforms": np.zeros((2, 4), np.float32),
        "starts": np.array([0, 3]),
        "widths": np.array([3, 3]),
        "destinations": np.array([1, 0]),
        "codes": np.zeros((2, 4), np.int64),
    }
    impl.draw_codes(**{name: a.copy() for name, a in arrays.items()})  # as given, it fits
    with pytest.raises(ValueError):
        impl.draw_codes(**(arrays | change))


@BOTH
def test_rescale_and_count_is_numpys_rescale_then_bincount_to_the_bit(impl):
    rng = np.random.default_rng(2)
    cells, next_cells = rng.integers(0, 5, 1000), rng.integers(0, 7, 1000)
    weights, ratios = rng.random(1000), rng.random(5) * 2
    expected = weights * ratios[cells]
    expected_counts = np.bincount(next_cells, weights=expected, minlength=7)
    counts = np.zeros(7)
    impl.rescale_and_count(weights, cells, ratios, next_cells, counts)
    assert np.array_equal(weights, expected) and np.array_equal(counts, expected_counts)


@BOTH
@pytest.mark.parametrize("bad", [-1, 5])
def test_rescale_and_count_refuses_a_cell_outside_its_table(impl, bad):
    cells = np.array([0, bad])
    with pytest.raises(IndexError):
        impl.rescale_and_count(np.ones(2), cells, np.ones(5), np.array([0, 0]), np.zeros(5))
    with pytest.raises(IndexError):
        impl.rescale_and_count(np.ones(2), np.array([0, 0]), np.ones(5), cells, np.zeros(5))
    with pytest.raises(ValueError):  # a cell per row, or none
        impl.rescale_and_count(np.ones(3), np.array([0, 0]), np.ones(5), cells, np.zeros(5))


@BOTH
def test_lexicographic_order_is_numpys_lexsort(impl):
    rng = np.random.default_rng(4)
    sizes = np.array([3, 1, 50, 7])
    keys = np.stack([rng.integers(0, size, 2000) for size in sizes])
    for count in range(len(sizes) + 1):
        expected = np.lexsort(keys[:count][::-1]) if count else np.arange(2000)
        assert np.array_equal(impl.lexicographic_order(keys[:count], sizes[:count]), expected)
    with pytest.raises(IndexError):
        impl.lexicographic_order(keys, sizes - 1)
    with pytest.raises(IndexError):
        impl.lexicographic_order(keys - 1, sizes)
    with pytest.raises(ValueError):  # a size per key
        impl.lexicographic_order(keys, sizes[:2])


@BOTH
def test_draw_codes_passes_a_running_sum_equal_to_its_target(impl):
    """Four equal logits and a uniform of 0.5: the target is the second running sum exactly,
    which the draw passes (the first running sum above it is the third's): the twins agree on
    such ties."""
    codes = draw(impl, [4], np.zeros((1, 4), np.float32), np.full((1, 1), 0.5, np.float32))
    assert codes.tolist() == [[2]]


@BOTH
def test_draw_codes_refuses_two_blocks_written_to_one_row_of_codes(impl):
    """(Another row of codes would keep whatever its memory held.)"""
    arrays = (np.zeros((6, 4), np.float32), np.zeros((2, 4), np.float32), np.array([0, 3]))
    with pytest.raises(ValueError):
        impl.draw_codes(*arrays, np.array([3, 3]), np.array([0, 0]), np.zeros((2, 4), np.int64))


def test_compile_for_sampling_compiles_what_sampling_calls():
    """After compile_for_sampling (what scripts/setup.sh runs), a generator's pass, raking
    and herding (int8 cells and codes here) compile nothing more: every type they pass was
    compiled, and cached."""
    import torch

    from rdpgan.frozen import FrozenGenerator
    from rdpgan.marginals import Marginals
    from rdpgan.models import Generator
    from rdpgan.postprocess import Herder, Raker
    from rdpgan.transform import Span

    kernels.compile_for_sampling()
    dispatchers = [kernels.layer_norm, kernels.draw_codes, kernels.rescale_and_count]
    dispatchers += [kernels.lexicographic_order, kernels.herd_picks]
    compiled = [list(d.signatures) for d in dispatchers]
    torch.manual_seed(0)
    generator = Generator(4, 2, [8], (Span(0, 3), Span(3, 7)), width=7).eval()
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 4)).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[rng.integers(0, 2, 50)]
    codes = FrozenGenerator.of(generator).sample_codes(z, y, rng, loops=kernels)
    labels = rng.integers(0, 2, 50)
    by_class = [np.full((2, 3), 1 / 3), np.full((2, 4), 1 / 4)]
    released = Marginals(
        by_class, [(0, 1)], [np.full((3, 4), 1 / 12)], [np.arange(3), np.arange(4)]
    )
    Raker(released, np.array([0.5, 0.5]), loops=kernels)(codes, labels, 10, rng)
    Herder([3, 4], 2, [(0, 1)], loops=kernels)(codes, labels, 10, rng)
    assert [list(d.signatures) for d in dispatchers] == compiled
