"""The generator's marginal loss: the released pairs' KL terms, batched over pairs."""

from __future__ import annotations

import numpy as np
import torch

from rdpgan.measure import Marginals
from rdpgan.training import _PairTargets


def test_the_batched_pair_kl_equals_each_pair_computed_on_its_own():
    """Columns of different code counts, coarse maps that merge codes, pairs of different
    shapes: every pair's KL(released || G's joint) as a direct per-pair computation gives."""
    rng = np.random.default_rng(0)
    codes = [3, 7, 2, 5]  # codes per column; the padded layout is 7 wide
    maps = [np.arange(c, dtype=np.int64) // 2 for c in codes]  # pairs of codes merged
    pairs = [(0, 1), (1, 3), (2, 0), (3, 2)]
    joint = []
    for i, j in pairs:
        table = rng.random((maps[i].max() + 1, maps[j].max() + 1))
        table[0, 0] = 0.0  # a cell the target leaves empty adds nothing
        joint.append(table / table.sum())
    # A released table wider than its columns' maps reach (its last coarse cell is empty).
    joint[1] = np.pad(joint[1], ((0, 0), (0, 3)))
    marginals = Marginals([np.ones((2, c)) / c for c in codes], pairs, joint, maps)
    rows, width = 50, max(codes)
    logits = torch.randn(rows, len(codes), width, dtype=torch.float64)
    for column, count in enumerate(codes):
        logits[:, column, count:] = float("-inf")
    probs = torch.softmax(logits, dim=-1).float().requires_grad_(True)
    weights = torch.rand(rows)
    weights = weights / weights.sum()

    got = _PairTargets(marginals, width, torch.device("cpu")).kl(probs, weights)

    p, w = probs.detach().double().numpy(), weights.double().numpy()
    for k, ((i, j), target) in enumerate(zip(pairs, joint, strict=True)):
        coarse_i = p[:, i, : codes[i]] @ np.eye(target.shape[0])[maps[i]]
        coarse_j = p[:, j, : codes[j]] @ np.eye(target.shape[1])[maps[j]]
        model = (w[:, None] * coarse_i).T @ coarse_j
        nonzero = target > 0
        expected = float((target[nonzero] * np.log(target[nonzero] / model[nonzero])).sum())
        assert abs(got.detach()[k].item() - expected) < 1e-5 * max(1.0, abs(expected))
    got.sum().backward()
    assert torch.isfinite(probs.grad).all()
