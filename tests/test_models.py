"""The networks: Opacus must accept D, and G's heads must respect the transformer's spans."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from opacus.validators import ModuleValidator

from rdpgan.frozen import NORMAL_LEVELS, FrozenGenerator, normal_grid, width_buckets
from rdpgan.models import CodeLinear, Discriminator, Generator, one_hot_columns
from rdpgan.transform import Span

SPANS = (Span(0, 2), Span(2, 5), Span(5, 7))


def sample_codes(generator: Generator, z: torch.Tensor, y: torch.Tensor, seed: int = 0):
    """The codes sampling (numpy, rdpgan.frozen) draws from ``generator`` for (z, y)."""
    draws = np.random.default_rng(seed)
    frozen = FrozenGenerator.of(generator)
    return torch.from_numpy(frozen.sample_codes(z.numpy(), y.numpy(), draws))


def test_opacus_module_validator_accepts_the_discriminator():
    discriminator = Discriminator(width=7, n_classes=2, hidden=[32, 32])
    assert ModuleValidator.validate(discriminator, strict=False) == []


def test_the_generator_has_no_layer_that_mixes_rows():
    """Opacus's validator refuses batch-mixing layers (BatchNorm): G must pass it like D, since
    the fake paired with a real row must not depend on the other rows of its batch."""
    generator = Generator(8, 2, [16], SPANS, width=7)
    assert ModuleValidator.validate(generator, strict=False) == []
    batchnorm = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    assert ModuleValidator.validate(batchnorm, strict=False) != []  # the check can fail


def test_generator_heads_are_one_hot_blocks():
    torch.manual_seed(0)
    generator = Generator(8, 2, [16, 16], SPANS, width=7).eval()
    y = torch.nn.functional.one_hot(torch.tensor([0, 1, 1, 0]), 2).float()
    out = generator(torch.randn(4, 8), y, hard=True)
    assert out.shape == (4, 7)
    for start, end in ((0, 2), (2, 5), (5, 7)):
        block = out[:, start:end]
        assert torch.equal(block.sum(dim=1), torch.ones(4))
        assert set(block.unique().tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("auxiliary", [False, True])
def test_discriminator_scores_pairs_and_rows_alike(auxiliary):
    discriminator = Discriminator(width=7, n_classes=2, hidden=[16], auxiliary_classifier=auxiliary)
    pairs, pair_classes = discriminator(torch.randn(5, 2, 7), torch.zeros(5, 2, 2))
    rows, row_classes = discriminator(torch.randn(5, 7), torch.zeros(5, 2))
    assert pairs.shape == (5, 2) and rows.shape == (5,)
    if auxiliary:
        assert pair_classes.shape == (5, 2, 2) and row_classes.shape == (5, 2)
    else:
        assert pair_classes is None and row_classes is None


def test_auxiliary_classifier_does_not_see_the_label():
    """The class head must predict the label from the row alone, or it would learn nothing."""
    discriminator = Discriminator(width=7, n_classes=2, hidden=[16], auxiliary_classifier=True)
    x = torch.randn(5, 7)
    _, given_0 = discriminator(x, torch.tensor([[1.0, 0.0]]).expand(5, 2))
    _, given_1 = discriminator(x, torch.tensor([[0.0, 1.0]]).expand(5, 2))
    assert torch.equal(given_0, given_1)


@pytest.mark.parametrize("gains", [(0.5, 1.5), (-1.5, 1.5)])
def test_the_frozen_generator_computes_the_torch_generators_code_logits(gains):
    """Sampling's numpy forward pass against training's: every block's logits, laid out in
    buckets and read back, with non-trivial normalisation (as after training): LayerNorm's
    gains positive, or of either sign and some zero (sampling folds them into the products)."""
    torch.manual_seed(0)
    generator = Generator(8, 2, [16, 16], WIDE_SPANS, width=50).eval()
    for module in generator.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.weight.data.uniform_(*gains)
            module.bias.data.uniform_(-0.5, 0.5)
            if gains[0] < 0:
                module.weight.data[::5] = 0.0
                module.weight.data[1] = 1e-40  # (subnormal: as good as 0)
    z = torch.randn(30, 8)
    y = torch.nn.functional.one_hot(torch.randint(0, 2, (30,)), 2).float()
    with torch.no_grad():
        expected = generator.head(generator.body(torch.cat([z, y], dim=1))).numpy()
    copy = FrozenGenerator.of(generator)
    buckets = copy.code_logits(copy.outputs(z.numpy(), y.numpy()))
    for row in (0, 17, 29):
        blocks = copy.layout.block_values([bucket[row] for bucket in buckets])
        for block, (start, end) in zip(blocks, WIDE_BLOCKS, strict=True):
            np.testing.assert_allclose(block, expected[row, start:end], rtol=1e-5, atol=1e-5)
    padded = sum(np.isinf(bucket).sum() for bucket in buckets) / 30
    assert padded == sum(np.prod(shape) for shape in copy.layout.bucket_shapes) - 50


def test_sampling_path_matches_the_hard_forward_pass():
    torch.manual_seed(0)  # near-ties in the logits would let the Gumbel noise move an argmax
    generator = Generator(8, 2, [16, 16], SPANS, width=7)
    for module in generator.modules():  # non-trivial normalisation, as after training
        if isinstance(module, torch.nn.LayerNorm):
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.5, 0.5)
    z = torch.randn(50, 8)
    y = torch.nn.functional.one_hot(torch.randint(0, 2, (50,)), 2).float()
    # With sharp logits both draws pick each block's largest logit: the same codes.
    generator.head.weight.data *= 1e4
    generator.head.bias.data *= 1e4
    rows = generator(z, y, hard=True)
    codes = sample_codes(generator, z, y)
    for block, (start, end) in enumerate(((0, 2), (2, 5), (5, 7))):
        assert torch.equal(codes[:, block], rows[:, start:end].argmax(dim=1))


def test_sampling_path_draws_categories_with_the_softmax_probabilities():
    torch.manual_seed(0)
    generator = Generator(4, 1, [8], (Span(0, 3),), width=3).eval()
    generator.head.weight.data.zero_()
    generator.head.bias.data = torch.log(torch.tensor([0.2, 0.3, 0.5]))
    codes = sample_codes(generator, torch.randn(20_000, 4), torch.ones(20_000, 1))
    frequencies = torch.bincount(codes[:, 0], minlength=3).float() / 20_000
    torch.testing.assert_close(frequencies, torch.tensor([0.2, 0.3, 0.5]), atol=0.015, rtol=0)


@pytest.mark.parametrize("offset", [-1000.0, -103.0, 103.0, 1000.0])
def test_sampling_draws_a_block_far_from_its_buckets_largest_logit(offset):
    """Two blocks in one bucket, one of them ``offset`` (natural units) from the other: shifted
    by the row's largest logit, the far lower block would underflow to zeros (1000 nats:
    always one code) or to a few subnormals (103 nats: a coarse softmax); it must keep its
    own softmax, and no logit may overflow."""
    torch.manual_seed(0)
    spans = (Span(0, 3), Span(3, 6))
    generator = Generator(4, 1, [8], spans, width=6).eval()
    assert len(generator.layout.buckets) == 1
    generator.head.weight.data.zero_()
    probs = torch.tensor([0.2, 0.3, 0.5])
    generator.head.bias.data = torch.cat([torch.zeros(3), probs.log() + offset])
    codes = sample_codes(generator, torch.randn(20_000, 4), torch.ones(20_000, 1))
    for column, expected in enumerate([torch.full((3,), 1 / 3), probs]):
        frequencies = torch.bincount(codes[:, column], minlength=3).float() / 20_000
        torch.testing.assert_close(frequencies, expected, atol=0.015, rtol=0)


# Blocks 2 to 30 codes wide, so G groups them in several buckets, some padded and some not.
WIDE_SPANS = (Span(0, 3), Span(3, 33), Span(33, 35), Span(35, 43), Span(43, 50))
# Each one-hot block's (start, end) in G's output, in span order.
WIDE_BLOCKS = [(s.start, s.end) for s in WIDE_SPANS]


def test_width_buckets_cover_each_block_once_and_trade_padding_for_buckets():
    widths = [3, 30, 2, 8, 7]
    assert sorted(j for b in width_buckets(widths) for j in b) == list(range(len(widths)))
    assert width_buckets(widths, cost=0) == [[2], [0], [4], [3], [1]]  # no padding at all
    assert width_buckets(widths, cost=10**6) == [[2, 0, 4, 3, 1]]  # one padded layout
    assert width_buckets([]) == []


def test_sampling_draws_every_blocks_codes_with_its_own_softmax():
    """Each block of a layout with several padded buckets, against its own softmax (one
    (z, y), many draws): a draw must never land on padding or in another block's codes."""
    torch.manual_seed(0)
    generator = Generator(8, 2, [16], WIDE_SPANS, width=50).eval()
    generator.head.weight.data *= 4  # distinct, uneven distributions per block
    assert len(generator.layout.buckets) > 1
    n = 40_000
    z = torch.randn(1, 8).expand(n, 8)
    y = torch.tensor([[0.0, 1.0]]).expand(n, 2)
    codes = sample_codes(generator, z, y, 1)
    with torch.no_grad():
        logits = generator.head(generator.body(torch.cat([z[:1], y[:1]], dim=1)))[0]
    for column, (start, end) in enumerate(WIDE_BLOCKS):
        counts = torch.bincount(codes[:, column], minlength=end - start)
        assert len(counts) == end - start  # no code past the block's own
        expected = torch.softmax(logits[start:end], dim=0)
        torch.testing.assert_close(counts / n, expected, atol=0.01, rtol=0)


def test_sampling_draws_each_blocks_code_independently():
    """For one (z, y), every pair of blocks (in one bucket or in two) is drawn independently:
    their joint frequencies are the product of their own (blocks sharing a uniform draw would
    keep each block's frequencies but tie their codes together)."""
    torch.manual_seed(0)
    generator = Generator(8, 2, [16], WIDE_SPANS, width=50).eval()
    generator.head.weight.data *= 4
    n = 40_000
    z = torch.randn(1, 8).expand(n, 8)
    y = torch.tensor([[0.0, 1.0]]).expand(n, 2)
    codes = sample_codes(generator, z, y, 2)
    widths = [end - start for start, end in WIDE_BLOCKS]
    shares = [torch.bincount(codes[:, j], minlength=w) / n for j, w in enumerate(widths)]
    for i in range(len(widths)):
        for j in range(i + 1, len(widths)):
            cells = codes[:, i] * widths[j] + codes[:, j]
            joint = torch.bincount(cells, minlength=widths[i] * widths[j]) / n
            product = torch.outer(shares[i], shares[j]).flatten()
            torch.testing.assert_close(joint, product, atol=0.01, rtol=0)


@pytest.mark.parametrize("hard", [False, True])
def test_generator_blocks_are_each_blocks_own_gumbel_softmax(hard):
    """Each block's cells against a per-block loop: the softmax of (logits + Gumbel noise) / τ,
    or its argmax's one-hot; the bucketed layout must neither mix blocks nor leak padding."""
    torch.manual_seed(0)
    generator = Generator(8, 2, [16], WIDE_SPANS, width=50, gumbel_tau=0.5)
    assert len(generator.layout.buckets) > 1
    z = torch.randn(6, 8)
    y = torch.nn.functional.one_hot(torch.tensor([0, 1, 1, 0, 1, 0]), 2).float()
    uniform = torch.rand(generator.gumbel_shape(6))
    out = generator(z, y, hard=hard, uniform=uniform)
    logits = generator.head(generator.body(torch.cat([z, y], dim=1)))
    gumbel = torch.zeros_like(logits)
    gumbel[:, generator.cells] = -(-uniform.log()).log()  # the draw of each cell
    columns = []
    for start, end in WIDE_BLOCKS:
        noisy = logits[:, start:end] + gumbel[:, start:end]
        expected = torch.softmax(noisy / 0.5, dim=1)
        if hard:  # straight-through: the one-hot forward, the softmax's gradient backward
            one_hot = torch.nn.functional.one_hot(noisy.argmax(1), end - start).float()
            expected = one_hot - expected.detach() + expected
        torch.testing.assert_close(out[:, start:end], expected)
        columns.append(expected)
    # The same gradients as the per-block loop's, for every parameter of G.
    weights = torch.randn_like(out)
    loop = torch.cat(columns, dim=1)
    for ours, theirs in zip(
        torch.autograd.grad((out * weights).sum(), list(generator.parameters())),
        torch.autograd.grad((loop * weights).sum(), list(generator.parameters())),
        strict=True,
    ):
        torch.testing.assert_close(ours, theirs)
    # code_probs: every block's softmax (no Gumbel noise), blocks side by side in span order.
    expected = [torch.softmax(logits[:, start:end], 1) for start, end in WIDE_BLOCKS]
    torch.testing.assert_close(generator.code_probs(z, y), torch.cat(expected, dim=1))


def straight_through_inputs(spans):
    """A straight-through G over ``spans`` and 300 rows' (z, y, uniform draws)."""
    torch.manual_seed(0)
    generator = Generator(8, 2, [16], spans, width=spans[-1].end, straight_through=True)
    z = torch.randn(300, 8)
    y = torch.nn.functional.one_hot(torch.randint(0, 2, (300,)), 2).float()
    uniform = torch.rand(generator.gumbel_shape(300)).clamp_min(2**-24)
    return generator, z, y, uniform


@pytest.mark.parametrize("spans", [SPANS, WIDE_SPANS])
def test_hard_rows_without_a_graph_are_the_straight_through_rows_exactly_one_hot(spans):
    """Without autograd (D's fakes), hard rows skip the softmax: the same cells as the
    straight-through rows with a graph (one-hot forward values, up to the last bit of the
    hot cell's 1 - p + p), each block exactly one 1. Padded buckets included (WIDE_SPANS)."""
    generator, z, y, uniform = straight_through_inputs(spans)
    with_graph = generator(z, y, uniform=uniform)
    assert with_graph.requires_grad
    with torch.no_grad():
        fast = generator(z, y, uniform=uniform)
    torch.testing.assert_close(fast, with_graph.detach(), rtol=0, atol=1e-6)
    assert set(fast.unique().tolist()) == {0.0, 1.0}
    for span in spans:
        block = fast[:, span.start : span.end]
        assert torch.equal(block.sum(1), torch.ones(300))
        assert torch.equal(block.argmax(1), with_graph[:, span.start : span.end].argmax(1))


@pytest.mark.parametrize("spans", [SPANS, WIDE_SPANS])
def test_the_columns_of_hard_rows_are_where_their_ones_are(spans):
    """D's step takes G's fakes as the columns of their 1s: exactly the hard rows' 1s."""
    generator, z, y, uniform = straight_through_inputs(spans)
    with torch.no_grad():
        rows = generator(z, y, uniform=uniform)
    columns = generator.one_hot_columns(z, y, uniform)
    assert columns.shape == (300, len(spans))
    assert torch.equal(torch.zeros_like(rows).scatter_(1, columns, 1.0), rows)
    assert torch.equal(one_hot_columns(rows, len(spans)).sort(1).values, columns.sort(1).values)


def test_one_hot_columns_are_given_only_for_rows_of_one_hot_blocks():
    rows = torch.tensor([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0]])
    assert one_hot_columns(rows, 2).tolist() == [[1, 2], [0, 3]]
    assert one_hot_columns(rows, 3) is None  # not that many 1s
    assert one_hot_columns(rows * 0.5, 1) is None  # not 0s and 1s
    assert one_hot_columns(torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]), 2) is None


def test_the_plain_critic_takes_rows_as_columns_only_with_one_hot_labels():
    discriminator = Discriminator(width=7, n_classes=2, hidden=[16])
    columns = torch.tensor([[0, 3], [1, 5]])
    one_hot = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    dense = torch.zeros(2, 7).scatter_(1, columns, 1.0)
    torch.testing.assert_close(discriminator(columns, one_hot)[0], discriminator(dense, one_hot)[0])
    with pytest.raises(ValueError, match="one-hot labels"):
        discriminator(columns, torch.full((2, 2), 0.5))


def test_a_code_linear_layer_takes_the_columns_of_ones_as_the_dense_rows():
    """Forward and both gradients, a repeated column counting twice (as a 2 would)."""
    torch.manual_seed(0)
    layer = CodeLinear(7, 5)
    columns = torch.tensor([[[0, 3], [1, 3]], [[6, 6], [2, 4]]])  # [samples, rows, k]
    dense = torch.zeros(2, 2, 7).scatter_add_(-1, columns, torch.ones(2, 2, 2))
    weights = torch.randn(2, 2, 5)
    out = layer(columns)
    (out * weights).sum().backward()
    grads = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    expected = layer(dense)
    (expected * weights).sum().backward()
    torch.testing.assert_close(out, expected)
    for ours, theirs in zip(grads, (p.grad for p in layer.parameters()), strict=True):
        torch.testing.assert_close(ours, theirs)


def test_the_samplers_latent_draws_are_standard_normal():
    """Draws from the normal's quantile grid: mean 0, variance 1, the normal's quantiles,
    every level equally likely (the grid's tails included) and no dependence between
    neighbouring draws (a wrong grid, a biased level or a shared draw fails one of these)."""
    generator = FrozenGenerator.of(Generator(5, 2, [8], SPANS, width=7))
    draws = generator.latent_draws(np.random.default_rng(0), 40_001)
    assert draws.shape == (40_001, 5) and draws.dtype == np.float32
    flat = draws.ravel().astype(np.float64)
    assert abs(flat.mean()) < 0.01 and abs(flat.var() - 1.0) < 0.01
    quantiles = np.quantile(flat, [0.025, 0.16, 0.5, 0.84, 0.975])
    np.testing.assert_allclose(quantiles, [-1.96, -0.994, 0.0, 0.994, 1.96], atol=0.02)
    half = len(flat) // 2
    assert abs(np.corrcoef(flat[:half], flat[half : 2 * half])[0, 1]) < 0.01
    assert abs(np.corrcoef(flat[:half] ** 2, flat[half : 2 * half] ** 2)[0, 1]) < 0.01
    grid = normal_grid()
    assert len(grid) == NORMAL_LEVELS and np.all(np.diff(grid) > 0)
    np.testing.assert_allclose(grid, -grid[::-1], atol=1e-6)
    np.testing.assert_allclose(grid[[0, NORMAL_LEVELS // 2]], [-4.3249, 2e-5], atol=1e-4)
    # Levels: in 16 equal runs of the grid, each run's share of the draws is 1/16.
    runs = np.searchsorted(grid[:: NORMAL_LEVELS // 16][1:], flat, side="right")
    shares = np.bincount(runs, minlength=16) / len(flat)
    np.testing.assert_allclose(shares, 1 / 16, atol=0.003)
