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
from itertools import accumulate, pairwise

import torch
from torch import nn
from torch.nn import functional as F

from rdpgan.config import ModelConfig
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


def _mlp(sizes: Sequence[int], make_block) -> nn.Sequential:
    layers: list[nn.Module] = []
    for fan_in, fan_out in pairwise(sizes):
        layers.extend(make_block(fan_in, fan_out))
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
        self.body = _mlp(sizes, lambda i, o: (nn.Linear(i, o), nn.LayerNorm(o), nn.ReLU()))
        self.head = nn.Linear(sizes[-1], width)

        blocks = list(spans)
        widths = [s.end - s.start for s in blocks]
        # The code cells (logits of one-hot blocks), grouped into buckets of blocks of similar
        # width: each bucket is one padded [blocks, width] softmax, so the padding stays small
        # (Adult's 14 blocks are 2 to 99 codes wide: one layout would be 1,386 cells for 413).
        self.buckets = width_buckets(widths)
        self.bucket_shapes = [(len(b), max(widths[j] for j in b)) for b in self.buckets]
        in_bucket_order = [j for bucket in self.buckets for j in bucket]
        cells = [torch.arange(blocks[j].start, blocks[j].end) for j in in_bucket_order]
        cells = torch.cat(cells) if cells else torch.zeros(0, dtype=torch.long)
        # Where each block's codes start among the cells (bucket order): argmax + this = cell.
        starts = list(accumulate((widths[j] for j in in_bucket_order), initial=0))
        first_blocks = accumulate(map(len, self.buckets), initial=0)
        self.bucket_cells = [(starts[i], starts[j]) for i, j in pairwise(first_blocks)]
        # Each cell's place in its bucket's flattened padded layout.
        in_bucket = [
            torch.arange(widths[j]) + slot * bucket_width
            for bucket, (_, bucket_width) in zip(self.buckets, self.bucket_shapes, strict=True)
            for slot, j in enumerate(bucket)
        ]
        empty = torch.zeros(0, dtype=torch.long)
        self.register_buffer("cell_index", cells, persistent=False)
        self.register_buffer("block_offsets", torch.tensor(starts[:-1]).long(), persistent=False)
        self.register_buffer(
            "bucket_index", torch.cat(in_bucket) if in_bucket else empty, persistent=False
        )
        # Codes in span order (block by block, as the transformer lays them out) from cells.
        self.register_buffer("span_cells", torch.argsort(cells), persistent=False)
        # Sampling's head emits each bucket's padded layout directly: the head row of each
        # output, or ``width`` (a zero row with bias -inf) for padding.
        sizes = [math.prod(shape) for shape in self.bucket_shapes]
        rows = torch.full((sum(sizes),), width)
        offsets = list(accumulate(sizes, initial=0))[:-1]
        for (start, end), offset in zip(self.bucket_cells, offsets, strict=True):
            rows[offset + self.bucket_index[start:end]] = cells[start:end]
        self.register_buffer("sampling_rows", rows, persistent=False)
        self.bucket_widths = [torch.tensor([widths[j] for j in b]) for b in self.buckets]
        # Blocks in span order from blocks in bucket order.
        self.register_buffer(
            "block_order", torch.argsort(torch.tensor(in_bucket_order)).long(), persistent=False
        )

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
        return (n, len(self.cell_index))

    def forward(
        self,
        z: torch.Tensor,
        y: torch.Tensor,
        hard: bool | None = None,
        uniform: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """A batch of encoded rows; ``hard`` (default: ``straight_through``) gives one-hots.

        ``uniform`` (shape :meth:`gumbel_shape`, values in (0, 1)) supplies the Gumbel noise;
        by default it comes from torch's global generator.
        """
        hard = self.straight_through if hard is None else hard
        logits = self._logits(z, y)
        if uniform is None:
            uniform = torch.rand(self.gumbel_shape(len(logits)), device=logits.device)
        elif uniform.shape != self.gumbel_shape(len(logits)):  # broadcasting would couple rows
            raise ValueError(
                f"uniform has shape {tuple(uniform.shape)}, not {self.gumbel_shape(len(logits))}"
            )
        # Gumbel(0, 1) = -log(-log U): uniform draws are several times cheaper than exponential.
        noisy = logits.index_select(1, self.cell_index) - (-uniform.log()).log()
        # Temperature does not move an argmax: one padded layout serves both.
        codes, chosen = self._softmax(noisy / self.gumbel_tau, argmax=hard)
        if chosen is not None:  # straight-through: one-hot forward, soft gradient backward
            one_hot = torch.zeros_like(codes).scatter_(1, chosen, 1.0)
            codes = one_hot - codes.detach() + codes
        return codes.index_select(1, self.span_cells)

    def _softmax(
        self, cells: torch.Tensor, argmax: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """[batch, cells]: the softmax of each block's cells; with ``argmax``, also [batch,
        blocks]: the cell of each block's largest value."""
        probs, chosen = [], []
        for (start, end), shape in zip(self.bucket_cells, self.bucket_shapes, strict=True):
            view = cells[:, start:end]
            padding = end - start < math.prod(shape)
            if padding:  # padded cells get no probability; index_copy's backward is a gather
                padded = view.new_full((len(cells), math.prod(shape)), float("-inf"))
                view = padded.index_copy(1, self.bucket_index[start:end], view)
            view = view.view(len(cells), *shape)
            bucket_probs = torch.softmax(view, dim=-1).flatten(1)
            if padding:
                bucket_probs = bucket_probs.index_select(1, self.bucket_index[start:end])
            probs.append(bucket_probs)
            if argmax:
                chosen.append(view.detach().argmax(-1))
        if not probs:  # a table without categorical codes
            return cells, cells.long() if argmax else None
        blocks = torch.cat(chosen, dim=1) + self.block_offsets if argmax else None
        return torch.cat(probs, dim=1), blocks

    def code_probs(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """[batch, codes]: each block's code distribution given (z, y), blocks one after
        another in span order.

        A sampled code is argmax(logits + Gumbel noise), which is distributed as
        softmax(logits); the mean over z is G's marginal of each column given the class,
        which the marginal loss matches to the released (DP) marginals, differentiably.
        """
        probs, _ = self._softmax(self._logits(z, y).index_select(1, self.cell_index))
        return probs.index_select(1, self.span_cells)

    @torch.no_grad()
    def sample_parts(
        self,
        z: torch.Tensor,
        y: torch.Tensor,
        rng: torch.Generator | None = None,
        tilt: Sequence[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """One code per block for sampling, without building one-hot rows.

        Each block's code is drawn by inverse transform, one uniform draw per block against the
        cumulative softmax of its logits: the distribution of ``forward(hard=True)``'s argmax of
        Gumbel-perturbed logits (temperature moves neither), with one draw per block instead of
        one per code. The head emits the padded bucket layout directly, so every block is a
        contiguous row of a [rows, blocks, width] tensor, and its code logits in base 2 (times
        log2 e): exp2 is the same exponential as exp and several times cheaper on a CPU. The
        matrix products run in the caller's precision (e.g. under bfloat16 autocast); the
        draws in float32. ``tilt`` (see :meth:`code_logits`) shifts every row's code logits
        alike, so the caller passes rows of one class. ``rng`` (default: torch's global one)
        draws the uniforms; a generator of its own makes concurrent calls safe and reproducible.
        """
        outputs = self.sampling_outputs(z, y)
        if not self.buckets:  # a table without feature columns
            return outputs.new_zeros(len(outputs), 0, dtype=torch.long)
        blocks = sum(len(bucket) for bucket in self.buckets)
        uniforms = torch.rand(len(outputs), blocks, 1, generator=rng, device=z.device)
        codes, block = [], 0
        buckets = zip(self.code_logits(outputs, tilt), self.bucket_widths, strict=True)
        for logits, widths in buckets:
            cumulative = _cumulative_exp2(logits)
            uniform = uniforms[:, block : block + logits.shape[1]]
            block += logits.shape[1]
            chosen = torch.searchsorted(cumulative, uniform * cumulative[..., -1:], right=True)
            # (u · total can round up to the total: keep it on the block's last code.)
            codes.append(torch.minimum(chosen.squeeze(-1), widths.to(z.device) - 1))
        return torch.cat(codes, dim=1).index_select(1, self.block_order)

    def sampling_outputs(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The head's outputs in sampling's layout: each bucket's padded code logits in bits,
        in the matrix products' precision."""
        weight, bias = self._sampling_head()
        return F.linear(self.body(torch.cat([z, y], dim=1)), weight, bias)

    def code_logits(
        self, outputs: torch.Tensor, tilt: Sequence[torch.Tensor] | None = None
    ) -> list[torch.Tensor]:
        """Each bucket's code logits (bits) of :meth:`sampling_outputs` in float32, [rows,
        blocks, width], plus the bucket's ``tilt`` ([blocks, width] bits, added in float32 as
        the logits are converted: no pass of its own), as :mod:`rdpgan.postprocess` fits it."""
        buckets, start = [], 0
        for index, shape in enumerate(self.bucket_shapes):
            end = start + math.prod(shape)
            logits = outputs[:, start:end].view(len(outputs), *shape)
            buckets.append(logits.float() if tilt is None else logits + tilt[index])
            start = end
        return buckets

    def bucket_layout(self, per_block: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Per-code values of each block (span order) laid out as :meth:`code_logits`' buckets,
        [blocks, width] each, 0 on padding."""
        layout = []
        for bucket, shape in zip(self.buckets, self.bucket_shapes, strict=True):
            cells = torch.zeros(shape)
            for slot, block in enumerate(bucket):
                cells[slot, : len(per_block[block])] = per_block[block]
            layout.append(cells)
        return layout

    def block_values(self, layout: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The inverse of :meth:`bucket_layout`: each block's per-code values, span order."""
        per_block: dict[int, torch.Tensor] = {}
        for bucket, cells, widths in zip(self.buckets, layout, self.bucket_widths, strict=True):
            for slot, (block, width) in enumerate(zip(bucket, widths.tolist(), strict=True)):
                per_block[block] = cells[slot, :width]
        return [per_block[block] for block in range(len(per_block))]

    def _sampling_head(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's (weight, bias) in sampling's layout: each bucket's padded cells, rows
        times log2 e, padding a zero row with bias -inf (no probability)."""
        zero_row = self.head.weight.new_zeros(1, self.head.in_features)
        padding = self.head.bias.new_full((1,), float("-inf"))
        weight = torch.cat([self.head.weight, zero_row]).index_select(0, self.sampling_rows)
        bias = torch.cat([self.head.bias, padding]).index_select(0, self.sampling_rows)
        scale = math.log2(math.e)
        return weight * scale, bias * scale


# A block whose codes' total (after the shift by its bucket's largest logit) falls below this is
# shifted by its own largest logit instead. Above it, what underflow takes from a block of w codes
# (each term below 2^-126 is off by at most 2^-150) is under w · 2^-50 of its total. (Rounding
# logit - shift at the bucket's scale moves a block's cumulative probabilities by up to ~2e-6
# instead of ~1e-7 with its own shift: far below sampling noise, and below the bfloat16
# rounding of the logits, ~2e-2, where the products run in bfloat16.)
SMALLEST_TOTAL = 2.0**-100


def _cumulative_exp2(logits: torch.Tensor) -> torch.Tensor:
    """[rows, blocks, width]: each block's cumulative sums of exp2(logits), up to a factor
    per block (any factor: only the ratios to the total matter).

    Each row's logits are shifted by the largest in its bucket, so that exp2 cannot overflow:
    one contiguous reduction per row rather than one per block over short rows.
    Only a bucket with a block far below that largest logit, which the shift would underflow,
    is shifted block by block.
    """
    flat = logits.view(len(logits), -1)
    cumulative = (flat - flat.amax(1, keepdim=True)).exp2_().view_as(logits).cumsum_(-1)
    if bool((cumulative[..., -1] < SMALLEST_TOTAL).any()):
        cumulative = (logits - logits.amax(-1, keepdim=True)).exp2_().cumsum_(-1)
    return cumulative


# Padded cells a bucket of blocks must save to be worth its own layout (a few more small kernels
# a pass). On Adult's blocks, 0 to 64 timed alike; one layout for all was the slowest.
BUCKET_COST = 16


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


class Discriminator(nn.Module):
    """Scores (row, label) pairs; works on any leading shape, e.g. [batch, 2, features].

    Taking a [B, 2, F] tensor lets the trainer hand D one *pair* (real row, fake row) per
    sample, so a per-sample gradient is that of the pair's joint loss (see synthesizer).

    With ``auxiliary_classifier`` D is an AC-GAN critic: its body sees the row alone, the label
    enters by projection (Miyato & Koyama 2018: realness = head(h) + embed(y)·h), and a second
    head predicts the label from the row. Training that head on real rows teaches the generator
    which features go with which class directly, which matters when a class has few rows.
    """

    def __init__(
        self, width: int, n_classes: int, hidden: Sequence[int], auxiliary_classifier: bool = False
    ):
        super().__init__()
        sizes = [width if auxiliary_classifier else width + n_classes, *hidden]
        self.body = _mlp(sizes, lambda i, o: (nn.Linear(i, o), nn.LeakyReLU(0.2)))
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
            return self.head(self.body(torch.cat([x, y], dim=-1))).squeeze(-1), None
        h = self.body(x)
        realness = self.head(h).squeeze(-1) + (self.embed(y) * h).sum(-1)
        return realness, self.classifier(h)
