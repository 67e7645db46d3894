"""The conditional generator G(z, y) and discriminator D(x, y): plain MLPs, nothing private.

Neither network mixes the rows of a batch: D has no BatchNorm (per-sample clipping cannot allow
it), and G normalises each row on its own (LayerNorm), because the fake row paired with a real
one in a private discriminator step must not depend on which other rows share the batch (with
BatchNorm, adding one real row would move the fake of every other pair, and the batch size would
leak into G's running statistics). G's heads follow the transformer's spans: Gumbel-softmax for each
one-hot block of codes (a number's place within its bin comes from a released density, not G).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import nn
from torch.nn import functional as F

from rdpgan.config import ModelConfig
from rdpgan.errors import UserInputError
from rdpgan.frozen import CodeLayout
from rdpgan.transform import Span, TableTransformer

# oneDNN's ISA caps under which bfloat16 products are still native (the rest, e.g. AVX2, cap
# the CPU below AVX-512 BF16: how an AVX2-only machine is emulated on a faster one).
BF16_ISAS = ("BF16", "AMX", "AVX10", "ALL", "DEFAULT")


def isa_capped_below_bf16() -> bool:
    """Whether ``ONEDNN_MAX_CPU_ISA`` or ``ATEN_CPU_CAPABILITY`` caps this process below native
    bfloat16 products, whatever the CPU has."""
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    aten = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
    capped = bool(onednn) and not any(isa in onednn for isa in BF16_ISAS)
    return capped or aten in ("avx2", "default")


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices natively (elsewhere it is emulated,
    and slower than float32); an ISA cap (:func:`isa_capped_below_bf16`) is obeyed."""
    if device.type == "cuda":
        try:
            return torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # torch < 2.4 counts native support only
            return torch.cuda.is_bf16_supported()
    check = getattr(torch.cpu, "_is_avx512_bf16_supported", None)  # AVX-512 BF16 (or AMX)
    native = check is not None and bool(check()) and not isa_capped_below_bf16()
    return device.type == "cpu" and native


def resolve_device(device: str) -> torch.device:
    """``auto`` means a CUDA GPU where one is present, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:
        raise UserInputError(f"unknown device {device!r}") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise UserInputError("device=cuda was asked for but no CUDA GPU is available")
    return resolved


def _mlp(sizes: Sequence[int], make_block) -> nn.Sequential:
    """Blocks ``make_block(fan_in, fan_out, depth)`` one after another, depth 0 first."""
    layers: list[nn.Module] = []
    for depth, (fan_in, fan_out) in enumerate(pairwise(sizes)):
        layers.extend(make_block(fan_in, fan_out, depth))
    return nn.Sequential(*layers)


class Generator(nn.Module):
    """Maps noise and a one-hot label to a row in the transformer's encoding.

    The one-hot blocks are handled in a few padded [batch, blocks, width] tensors, one per
    bucket of blocks of similar width, rather than a Python loop over columns: a table with 40
    categorical columns would otherwise cost 40 tiny kernel launches per forward pass, which
    dominates training time on a CPU; one tensor for all would be mostly padding.
    """

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
        self.gumbel_tau = gumbel_tau
        self.straight_through = straight_through
        sizes = [latent_dim + n_classes, *hidden]
        self.body = _mlp(sizes, lambda i, o, _: (nn.Linear(i, o), nn.LayerNorm(o), nn.ReLU()))
        self.head = nn.Linear(sizes[-1], width)

        # The code cells (logits of one-hot blocks) in buckets of blocks of similar width, as
        # sampling lays them out (rdpgan.frozen.CodeLayout).
        self.layout = CodeLayout(spans, width)
        self.bucket_shapes = self.layout.bucket_shapes
        self.bucket_cells = self.layout.bucket_cells
        for name in ("cells", "block_offsets", "bucket_index", "span_cells"):
            self.register_buffer(name, torch.as_tensor(getattr(self.layout, name)), False)

    @classmethod
    def for_table(cls, config: ModelConfig, transformer: TableTransformer) -> Generator:
        """G for a transformer's encoding, as training, loading and the benchmarks build it."""
        return cls(
            config.latent_dim,
            transformer.n_classes,
            config.generator_hidden,
            transformer.spans,
            transformer.width,
            config.gumbel_tau,
            config.straight_through,
        )

    def _logits(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The head's outputs in float32 (a no-op unless the matrix products ran in bfloat16
        under autocast): the Gumbel noise, softmax and losses after them stay in float32."""
        return self.head(self.body(torch.cat([z, y], dim=1))).float()

    def gumbel_shape(self, n: int) -> tuple[int, int]:
        """Shape of the uniform draws :meth:`forward` turns into Gumbel noise for ``n`` rows:
        one per code of every one-hot block (none for the padding of the block layout)."""
        return (n, len(self.cells))

    def forward(
        self,
        z: torch.Tensor,
        y: torch.Tensor,
        hard: bool | None = None,
        uniform: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """A batch of encoded rows; ``hard`` (default: ``straight_through``) gives one-hots.

        ``uniform`` (shape :meth:`gumbel_shape`, values in (0, 1)) supplies the Gumbel noise;
        by default it comes from torch's global generator. Without autograd (D's fakes), hard
        rows skip the softmax the straight-through gradient needs: the same one-hots, their
        1s exact.
        """
        hard = self.straight_through if hard is None else hard
        noisy = self._noisy_cells(z, y, uniform)
        if hard and not torch.is_grad_enabled():  # no gradient to carry: the one-hots alone
            chosen = self._block_argmax(noisy / self.gumbel_tau)
            one_hot = torch.zeros_like(noisy).scatter_(1, chosen, 1.0)
            return one_hot.index_select(1, self.span_cells)
        # Temperature does not move an argmax: one padded layout serves both.
        codes, chosen = self._softmax(noisy / self.gumbel_tau, argmax=hard)
        if chosen is not None:  # straight-through: one-hot forward, soft gradient backward
            one_hot = torch.zeros_like(codes).scatter_(1, chosen, 1.0)
            codes = one_hot - codes.detach() + codes
        return codes.index_select(1, self.span_cells)

    @torch.no_grad()
    def one_hot_columns(
        self, z: torch.Tensor, y: torch.Tensor, uniform: torch.Tensor | None = None
    ) -> torch.Tensor:
        """[batch, blocks]: the encoding's column of each block's 1 in the hard rows
        :meth:`forward` draws from the same inputs (where the encoding is all one-hot blocks:
        :class:`CodeLinear` takes rows so)."""
        chosen = self._block_argmax(self._noisy_cells(z, y, uniform) / self.gumbel_tau)
        return self.cells[chosen]

    def _noisy_cells(
        self, z: torch.Tensor, y: torch.Tensor, uniform: torch.Tensor | None
    ) -> torch.Tensor:
        """The code cells' logits plus Gumbel noise made from ``uniform``."""
        logits = self._logits(z, y)
        if uniform is None:
            uniform = torch.rand(self.gumbel_shape(len(logits)), device=logits.device)
        elif uniform.shape != self.gumbel_shape(len(logits)):  # broadcasting would couple rows
            raise ValueError(
                f"uniform has shape {tuple(uniform.shape)}, not {self.gumbel_shape(len(logits))}"
            )
        # Gumbel(0, 1) = -log(-log U): uniform draws are several times cheaper than exponential.
        return logits.index_select(1, self.cells) - (-uniform.log()).log()

    def _softmax(
        self, cells: torch.Tensor, argmax: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """[batch, cells]: the softmax of each block's cells; with ``argmax``, also [batch,
        blocks]: the cell of each block's largest value."""
        probs, views = [], []
        for (start, end), shape in zip(self.bucket_cells, self.bucket_shapes, strict=True):
            view = self._bucket(cells, start, end, shape)
            bucket_probs = torch.softmax(view, dim=-1).flatten(1)
            if end - start < math.prod(shape):
                bucket_probs = bucket_probs.index_select(1, self.bucket_index[start:end])
            probs.append(bucket_probs)
            views.append(view)
        if not probs:  # a table without categorical codes
            return cells, cells.long() if argmax else None
        return torch.cat(probs, dim=1), self._argmax(views) if argmax else None

    def _block_argmax(self, cells: torch.Tensor) -> torch.Tensor:
        """[batch, blocks]: the cell of each block's largest value, as :meth:`_softmax` picks
        it, without the softmax."""
        if not self.bucket_shapes:  # a table without categorical codes
            return cells.long()
        return self._argmax(
            [
                self._bucket(cells, start, end, shape)
                for (start, end), shape in zip(self.bucket_cells, self.bucket_shapes, strict=True)
            ]
        )

    def _argmax(self, views: list[torch.Tensor]) -> torch.Tensor:
        """[batch, blocks]: each block's largest cell, as a column of the cells, from the
        buckets' padded layouts (:meth:`_bucket`)."""
        return torch.cat([view.detach().argmax(-1) for view in views], dim=1) + self.block_offsets

    def _bucket(
        self, cells: torch.Tensor, start: int, end: int, shape: tuple[int, int]
    ) -> torch.Tensor:
        """[batch, blocks, width]: one bucket's cells in its padded layout, padding at -inf
        (no probability, never an argmax; index_copy's backward is a gather)."""
        view = cells[:, start:end]
        if end - start < math.prod(shape):
            padded = view.new_full((len(cells), math.prod(shape)), float("-inf"))
            view = padded.index_copy(1, self.bucket_index[start:end], view)
        return view.view(len(cells), *shape)

    def code_probs(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """[batch, codes]: each block's code distribution given (z, y), blocks one after
        another in span order.

        A sampled code is argmax(logits + Gumbel noise), which is distributed as
        softmax(logits); the mean over z is G's marginal of each column given the class,
        which the marginal loss matches to the released (DP) marginals, differentiably.
        """
        probs, _ = self._softmax(self._logits(z, y).index_select(1, self.cells))
        return probs.index_select(1, self.span_cells)


class CodeLinear(nn.Linear):
    """A linear layer that also takes its one-hot input as the columns of its 1s.

    An encoded row is one 1 per one-hot block (Adult: 14 of 413 columns), so its product with
    the weight is a sum of 14 of the weight's columns: a gather instead of a dense product, and
    the weight's gradient a scatter of the output gradients. Integer input [..., k] holds each
    row's k columns (a column may repeat: it then counts twice, as a 2 would); float input is
    the dense row, as for :class:`torch.nn.Linear`. Either way the result and the gradients are
    those of the dense layer.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_floating_point():
            return super().forward(x)
        rows = _SumOfColumns.apply(x.reshape(math.prod(x.shape[:-1]), x.shape[-1]), self.weight)
        out = rows.view(*x.shape[:-1], self.out_features)
        return out if self.bias is None else out + self.bias


class _SumOfColumns(torch.autograd.Function):
    """[rows, out]: for each row of ``columns`` [rows, k], the sum of those k columns of
    ``weight`` [out, in]; its gradient a sparse product (torch's own embedding backward is
    slower than the dense product it replaces)."""

    @staticmethod
    def forward(ctx, columns: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(columns)
        ctx.in_features = weight.shape[1]
        return F.embedding_bag(columns, weight.t().contiguous(), mode="sum")

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[None, torch.Tensor]:
        (columns,) = ctx.saved_tensors
        return None, column_weight_grad(columns, grad, ctx.in_features)


def column_weight_grad(columns: torch.Tensor, grad: torch.Tensor, in_features: int) -> torch.Tensor:
    """[out, in]: the weight gradient of a linear layer whose rows were given as the columns
    of their 1s (``columns`` [rows, k], in range), from the output gradients ``grad``
    [rows, out]: a sparse product, each column's count in each row (a repeat summed) times
    ``grad``."""
    rows, k = columns.shape
    row_of_each = torch.arange(rows, device=columns.device).repeat_interleave(k)
    ones = torch.ones(rows * k, dtype=grad.dtype, device=grad.device)
    counts = torch.sparse_coo_tensor(  # [in, rows]
        torch.stack([columns.reshape(-1), row_of_each]),
        ones,
        (in_features, rows),
        check_invariants=False,
    )
    return torch.sparse.mm(counts, grad).t().contiguous()


def one_hot_columns(x: torch.Tensor, n_blocks: int) -> torch.Tensor | None:
    """[rows, n_blocks]: the columns of each row's 1s, where every row of ``x`` [rows, width]
    is 0s and exactly ``n_blocks`` 1s (the encoding of a table of codes); else None."""
    if x.ndim != 2 or not bool(((x == 0) | (x == 1)).all()):
        return None
    if not bool((x.sum(1) == n_blocks).all()):
        return None
    return x.nonzero()[:, 1].view(len(x), n_blocks)


def _critic_block(fan_in: int, fan_out: int, depth: int) -> tuple[nn.Module, nn.Module]:
    linear = CodeLinear if depth == 0 else nn.Linear  # the rows enter at depth 0, one-hot
    return linear(fan_in, fan_out), nn.LeakyReLU(0.2)


class Discriminator(nn.Module):
    """Scores (row, label) pairs; works on any leading shape, e.g. [batch, 2, features].

    Taking a [B, 2, F] tensor lets the trainer hand D one *pair* (real row, fake row) per
    sample, so a per-sample gradient is that of the pair's joint loss (see synthesizer). Rows
    may come as the columns of their 1s instead ([B, 2, k] integers, :class:`CodeLinear`).

    With ``auxiliary_classifier`` D is an AC-GAN critic: its body sees the row alone, the label
    enters by projection (Miyato & Koyama 2018: realness = head(h) + embed(y)·h), and a second
    head predicts the label from the row. Training that head on real rows teaches the generator
    which features go with which class directly, which matters when a class has few rows.
    """

    def __init__(
        self, width: int, n_classes: int, hidden: Sequence[int], auxiliary_classifier: bool = False
    ):
        super().__init__()
        self.width = width
        sizes = [width if auxiliary_classifier else width + n_classes, *hidden]
        self.body = _mlp(sizes, _critic_block)
        self.head = nn.Linear(sizes[-1], 1)
        self.embed = nn.Linear(n_classes, sizes[-1], bias=False) if auxiliary_classifier else None
        self.classifier = nn.Linear(sizes[-1], n_classes) if auxiliary_classifier else None

    @classmethod
    def for_table(cls, config: ModelConfig, transformer: TableTransformer) -> Discriminator:
        """D for a transformer's encoding (an AC-GAN critic when ``auxiliary_weight`` > 0)."""
        return cls(
            transformer.width,
            transformer.n_classes,
            config.discriminator_hidden,
            auxiliary_classifier=config.auxiliary_weight > 0,
        )

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Realness logits, and class logits (or None without the auxiliary classifier)."""
        if self.embed is None or self.classifier is None:
            label = y
            if not x.is_floating_point():  # the label's 1 as one more column, after the row's
                if not bool((y.sum(-1) == 1).all() and ((y == 0) | (y == 1)).all()):
                    raise ValueError("rows as columns need one-hot labels")
                label = y.argmax(-1, keepdim=True) + self.width
            return self.head(self.body(torch.cat([x, label], dim=-1))).squeeze(-1), None
        h = self.body(x)
        realness = self.head(h).squeeze(-1) + (self.embed(y) * h).sum(-1)
        return realness, self.classifier(h)
