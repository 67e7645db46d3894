"""The conditional generator G(z, y) and discriminator D(x, y): plain MLPs, nothing private.

D has no BatchNorm (it would mix samples, which per-sample clipping cannot allow) so Opacus
accepts it; G may use BatchNorm since it never touches private rows. G's heads follow the
transformer's spans: tanh for a continuous value, Gumbel-softmax for each one-hot block.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import nn
from torch.nn import functional as F

from rdpgan.transform import Span


def _mlp(sizes: Sequence[int], make_block) -> nn.Sequential:
    layers: list[nn.Module] = []
    for fan_in, fan_out in pairwise(sizes):
        layers.extend(make_block(fan_in, fan_out))
    return nn.Sequential(*layers)


class Generator(nn.Module):
    """Maps noise and a one-hot label to a row in the transformer's encoding."""

    def __init__(
        self,
        latent_dim: int,
        n_classes: int,
        hidden: Sequence[int],
        spans: Sequence[Span],
        width: int,
        gumbel_tau: float = 0.2,
        straight_through: bool = False,
    ):
        super().__init__()
        self.latent_dim = latent_dim
        self.n_classes = n_classes
        self.spans = tuple(spans)
        self.gumbel_tau = gumbel_tau
        self.straight_through = straight_through
        sizes = [latent_dim + n_classes, *hidden]
        self.body = _mlp(sizes, lambda i, o: (nn.Linear(i, o), nn.BatchNorm1d(o), nn.ReLU()))
        self.head = nn.Linear(sizes[-1], width)

    def forward(self, z: torch.Tensor, y: torch.Tensor, hard: bool | None = None) -> torch.Tensor:
        """A batch of encoded rows; ``hard`` (default: ``straight_through``) gives one-hots."""
        hard = self.straight_through if hard is None else hard
        logits = self.head(self.body(torch.cat([z, y], dim=1)))
        parts = []
        for span in self.spans:
            block = logits[:, span.start : span.end]
            if span.activation == "tanh":
                parts.append(torch.tanh(block))
            else:
                parts.append(F.gumbel_softmax(block, tau=self.gumbel_tau, hard=hard))
        return torch.cat(parts, dim=1)


class Discriminator(nn.Module):
    """Scores (row, label) pairs; works on any leading shape, e.g. [batch, 2, features].

    Taking a [B, 2, F] tensor lets the trainer hand D one *pair* (real row, fake row) per
    sample, so a per-sample gradient is that of the pair's joint loss (see synthesizer).
    """

    def __init__(self, width: int, n_classes: int, hidden: Sequence[int]):
        super().__init__()
        sizes = [width + n_classes, *hidden]
        self.body = _mlp(sizes, lambda i, o: (nn.Linear(i, o), nn.LeakyReLU(0.2)))
        self.head = nn.Linear(sizes[-1], 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(torch.cat([x, y], dim=-1))).squeeze(-1)
