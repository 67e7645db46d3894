"""The CGAN's two updates, one discriminator step and one generator step, as a small object,
and :func:`run_steps`, the loop that runs them (with checkpoints and a clean Ctrl-C): one after
the other, or simultaneous, G scoring its fakes with D as it was before D's step.

Kept apart from :mod:`rdpgan.fitting` (which decides the budget and the number of steps) so
the exact code that trains can also be timed by ``scripts/bench/bench_speed.py`` and checkpointed.
The critic is a :class:`~rdpgan.privacy.dp_sgd.DPSGD` or its non-private twin; this module does
not know which.

What a private discriminator step draws (the Poisson batch, and the latent vector, label and
Gumbel noise of the fake row paired with each real one) comes from the run's
:class:`~rdpgan.privacy.randomness.SecretRandomness` (its DP-SGD noise from a second such
source, a step ahead on the generator's thread): one i.i.d. fake per sampled row, no more,
so no pair depends on another and nothing public (``seed``'s stream, which the generator step
uses) depends on the size of the batch.
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.optim.swa_utils import AveragedModel
from tqdm.auto import tqdm

from rdpgan import distributed
from rdpgan.checkpoint import Checkpointer
from rdpgan.config import ModelConfig, TrainConfig
from rdpgan.frozen import width_buckets
from rdpgan.marginals import Marginals
from rdpgan.models import Generator, native_bf16, one_hot_columns
from rdpgan.privacy.dp_sgd import DPSGD, PlainSGD
from rdpgan.privacy.ledger import PrivacyLedger
from rdpgan.privacy.randomness import SecretRandomness
from rdpgan.threads import usable_cores

# Fewest fake rows per generator step: a tiny table's expected Poisson batch can round to one
# row, and a generator gradient from one row is mostly noise (fakes cost no privacy).
MIN_FAKE_BATCH = 64


def adam_optimizers(
    generator: Generator, discriminator: nn.Module, config: TrainConfig
) -> tuple[torch.optim.Adam, torch.optim.Adam]:
    """(G's optimizer, D's optimizer) with the run's learning rates and betas."""
    betas = (config.betas[0], config.betas[1])
    return (
        torch.optim.Adam(generator.parameters(), lr=config.generator_lr, betas=betas, foreach=True),
        torch.optim.Adam(
            discriminator.parameters(), lr=config.discriminator_lr, betas=betas, foreach=True
        ),
    )


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Resume an optimizer's state, still stepping all of its tensors in one call (foreach,
    which a loop over G's and D's few tensors costs more than the arithmetic): a checkpoint
    from before that choice would bring back its per-tensor loop with its settings."""
    optimizer.load_state_dict(state)
    for group in optimizer.param_groups:
        group["foreach"] = True


def _spare_core() -> bool:
    """Whether a core is left beside torch's: one intra-op thread (the thread policy's), and
    two cores for each process training on this machine (under torchrun, every rank runs its
    own thread; ``LOCAL_WORLD_SIZE`` counts this node's ranks)."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", distributed.world_size()))
    return torch.get_num_threads() == 1 and usable_cores() >= 2 * local


@dataclass
class _GeneratorInputs:
    """The half of a generator step that can run beside D's step: a fake batch (G's graph
    kept until the adversarial loss's backward), its labels, and the marginal loss, whose
    gradient is already in G's ``grad``."""

    fake_x: torch.Tensor
    fake_y: torch.Tensor
    codes: torch.Tensor
    marginal_loss: float
    # With a discriminator snapshot (simultaneous steps): the adversarial loss through it,
    # its gradient already in G's ``grad`` too, and D's logits on the fakes.
    adversarial: tuple[torch.Tensor, torch.Tensor] | None = None
    # Once G's update is done (beside D's step: on the generator's thread), G's loss and D's
    # loss on the fakes.
    losses: tuple[float, float] | None = None


class _FakesGate:
    """Holds G's update, on the generator's thread, until D's step has drawn its fakes from G
    (as it does in order: from G's weights before the update), or called off if D's step
    failed before. The first decision holds; a later one is a no-op (an interrupted caller's
    cleanup calls off a gate it may already have opened)."""

    def __init__(self) -> None:
        self._decided = threading.Event()
        self._lock = threading.Lock()
        self._go = False

    def decide(self, go: bool) -> None:
        """Open the gate (``go``: D's fakes are drawn) or call the update off."""
        with self._lock:
            if not self._decided.is_set():
                self._go = go
                self._decided.set()

    def passed(self) -> bool:
        """Wait for D's fakes; whether the update may go ahead."""
        self._decided.wait()
        return self._go


def _columns_of_ones(generator: Generator, features: torch.Tensor) -> torch.Tensor | None:
    """The rows as the columns of their 1s where the encoding is all one-hot blocks and G's
    fakes in D's step are hard one-hots too: D's first layer then gathers (CodeLinear). The
    choice is the layout's (public); the encoding gives every block one 1 by construction, so
    rows that break it are a bug, not a reason to switch paths on the private table."""
    if not generator.straight_through or not len(generator.cells) == features.shape[1] > 0:
        return None
    columns = one_hot_columns(features, len(generator.block_offsets))
    if columns is None:
        raise RuntimeError("the encoded rows are not one 1 per one-hot block")
    return columns


class CGANTrainer:
    """Holds the encoded training rows, both networks and their optimizers."""

    def __init__(
        self,
        generator: Generator,
        critic: DPSGD | PlainSGD,
        generator_optimizer: torch.optim.Optimizer,
        features: torch.Tensor,
        labels: torch.Tensor,
        label_probs: torch.Tensor,
        secret: SecretRandomness,
        sample_rate: float,
        expected_batch: int,
        auxiliary_weight: float = 0.0,
        marginals: Marginals | None = None,
        marginal_weight: float = 0.0,
        marginal_rows: int = ModelConfig.marginal_rows,
        bf16_generator_step: bool = False,
        generator_ema: float = 0.0,
        critic_snapshot: nn.Module | None = None,
        generator_batch: int | None = None,
    ):
        self.generator = generator
        self.critic = critic
        self.generator_optimizer = generator_optimizer
        self.features = features
        self.feature_columns = _columns_of_ones(generator, features)
        self.one_hot = F.one_hot(labels, label_probs.numel()).float()
        self.label_probs = label_probs
        self.secret = secret
        probs = label_probs.detach().double().cpu().numpy()
        self._label_probs_np = probs / probs.sum()  # what the secret draws of fake labels use
        self.sample_rate = sample_rate
        # Under torchrun each rank makes its share of G's batch; their gradients are averaged.
        fake_batch = expected_batch // distributed.world_size()
        if generator_batch is not None:
            fake_batch = min(fake_batch, generator_batch // distributed.world_size())
        self.fake_batch = max(fake_batch, MIN_FAKE_BATCH)
        self.auxiliary_weight = auxiliary_weight
        device = label_probs.device
        # [class, code]: every column's released distribution per class, columns side by side
        # as in :meth:`Generator.code_probs`.
        self.marginals = None
        if marginals is not None:
            by_class = np.concatenate(marginals.by_class, axis=1)
            self.marginals = torch.as_tensor(by_class, dtype=torch.float32, device=device)
        self.marginal_columns = len(marginals.by_class) if marginals is not None else 0
        self.marginal_weight = marginal_weight if self.marginals is not None else 0.0
        self.marginal_rows = marginal_rows
        released_pairs = marginals is not None and marginals.pairs
        self.pairs = _PairTargets(marginals, device) if released_pairs else None
        self.bf16_generator_step = bf16_generator_step and native_bf16(device)
        # G's own half of its step runs beside D's step where a second core is there for it.
        self._pool = (
            ThreadPoolExecutor(1, thread_name_prefix="rdpgan-generator") if _spare_core() else None
        )
        critic.draw_noise_ahead(self._pool)  # a step ahead, in the gaps between G's halves
        self._generator_half: _GeneratorInputs | Future[_GeneratorInputs] | None = None
        self._fakes_gate: _FakesGate | None = None
        # Simultaneous steps: G's step scores its fakes with D as it was before D's step (a
        # copy, hooks-free, of its weights alone), so all of it can overlap D's (the update
        # once D's step has drawn its fakes from G).
        self.critic_snapshot = critic_snapshot
        self._snapshot_copies: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None
        if critic_snapshot is not None:
            critic_snapshot.requires_grad_(False)
            copies = list(critic_snapshot.parameters()), list(critic.module.parameters())
            if [p.shape for p in copies[0]] != [p.shape for p in copies[1]]:
                raise ValueError("the discriminator's snapshot does not have D's shape")
            self._snapshot_copies = copies
        self.generator_average = (
            AveragedModel(generator, multi_avg_fn=_geometric_average(generator_ema))
            if generator_ema > 0
            else None
        )

    def fake(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``n`` generated rows, their one-hot labels and label codes (drawn from the released
        label frequencies)."""
        codes = torch.multinomial(self.label_probs, n, replacement=True)
        y = F.one_hot(codes, self.label_probs.numel()).float()
        z = torch.randn(n, self.generator.latent_dim, device=self.label_probs.device)
        return self.generator(z, y), y, codes

    def discriminator_step(self) -> None:
        """One DP-SGD step on a Poisson batch of (real, fake) pairs, drawn from the secret source.

        Nothing computed on the real rows leaves this method: their loss is private data.
        """
        rows = self.secret.poisson_indices(self.features.shape[0], self.sample_rate)
        index = torch.as_tensor(rows, device=self.features.device)
        fake_x, fake_y = self.secret_fakes(len(index))
        self._decide_update(go=True)  # G's weights are read: its update may go ahead
        real_x = self.features if self.feature_columns is None else self.feature_columns
        pair_x = torch.stack([real_x[index], fake_x], dim=1)
        pair_y = torch.stack([self.one_hot[index], fake_y], dim=1)
        self.critic.zero_grad()
        logits, class_logits = self.critic.module(pair_x, pair_y)
        targets = torch.zeros_like(logits)
        targets[:, 0] = 1.0
        per_pair = F.binary_cross_entropy_with_logits(logits, targets, reduction="none").sum(1)
        if class_logits is not None:  # AC-GAN: D also learns to tell the label of a real row
            real_labels = pair_y[:, 0].argmax(-1)
            label_loss = F.cross_entropy(class_logits[:, 0], real_labels, reduction="none")
            per_pair = per_pair + self.auxiliary_weight * label_loss
        self.critic.step(per_pair)

    @torch.no_grad()
    def secret_fakes(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` i.i.d. generated rows and their one-hot labels, every draw from the secret
        source. G treats each row on its own, so fake i depends only on draw i. The rows come
        as the real ones are held: dense, or the columns of their 1s."""
        device = self.features.device
        codes = torch.as_tensor(self.secret.categorical(self._label_probs_np, n), device=device)
        y = F.one_hot(codes, self.label_probs.numel()).float()
        z = self.secret.standard_normal((n, self.generator.latent_dim), device)
        uniform = self.secret.open_uniform(self.generator.gumbel_shape(n), device)
        if self.feature_columns is not None:
            return self.generator.one_hot_columns(z, y, uniform), y
        return self.generator(z, y, uniform=uniform), y

    @property
    def has_second_thread(self) -> bool:
        """Whether G's half can run on a thread of its own (a core is spare for it)."""
        return self._pool is not None

    def prepare_generator_step(self, beside: bool = True) -> None:
        """Compute the part of the next generator step that can run before D's step is done:
        its marginal loss and gradient, and the fake rows D will score (and with simultaneous
        steps their adversarial loss and gradient through D's snapshot, taken here, on this
        thread, before D's step starts); with ``beside``, on a second thread while the
        discriminator step runs, so that on a 2-core CPU the two overlap. Neither touches the
        other's tensors (D's step reads G's weights and draws its fakes from the secret source;
        this half reads the snapshot, writes G's gradients and draws from the public stream, in
        the order a sequential step does): the result is the same either way, bit for bit
        (tested in float32 and bfloat16). With simultaneous steps beside (in one process),
        G's update follows on the same thread once D's step has drawn its fakes from G, so
        that thread then writes G's weights, Adam's state and the moving average too.
        :meth:`generator_step` waits for it.
        """
        if self._generator_half is not None:
            raise RuntimeError("a generator half is already prepared and not yet used")
        if self._snapshot_copies is not None:
            with torch.no_grad():
                torch._foreach_copy_(*self._snapshot_copies)
        if self._pool is None or not beside:
            self._generator_half = self._generator_inputs()
            return
        if self.critic_snapshot is None or distributed.world_size() > 1:
            self._generator_half = self._pool.submit(self._generator_inputs)
            return
        # Simultaneous steps in one process: G's update needs nothing of D's step but its
        # fakes, so it too runs beside (one process only: a collective on this thread could
        # interleave with D's on the main thread in another order on each rank).
        self._fakes_gate = _FakesGate()
        self._generator_half = self._pool.submit(self._whole_generator_step, self._fakes_gate)

    def _whole_generator_step(self, gate: _FakesGate) -> _GeneratorInputs:
        """G's half, then (once D's step has drawn its fakes from G) its update."""
        half = self._generator_inputs()
        if gate.passed():
            half.losses = self._update_generator(half)
        return half

    def _generator_inputs(self) -> _GeneratorInputs:
        """G's gradient of the marginal loss, and a fake batch through G; with simultaneous
        steps, the fakes' adversarial loss through D's snapshot and its gradient too."""
        self.generator_optimizer.zero_grad(set_to_none=True)
        marginal_loss = 0.0
        if self.marginal_weight > 0:
            weighted = self.marginal_weight * self.marginal_loss()
            weighted.backward()
            marginal_loss = float(weighted.detach())
        with self.generator_step_precision():
            fake_x, fake_y, codes = self.fake(self.fake_batch)
        half = _GeneratorInputs(fake_x, fake_y, codes, marginal_loss)
        if self.critic_snapshot is not None:
            half.adversarial = self._adversarial_backward(self.critic_snapshot, half)
        return half

    def _adversarial_backward(
        self, discriminator: nn.Module, half: _GeneratorInputs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The non-saturating loss (and the class loss) of ``half``'s fakes through
        ``discriminator``, its gradient added to G's; returns it and D's logits."""
        with self.generator_step_precision():
            logits, class_logits = discriminator(half.fake_x, half.fake_y)
        logits = logits.float()
        loss = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
        if class_logits is not None:  # rows of class y should look like class y to D
            class_loss = F.cross_entropy(class_logits.float(), half.codes)
            loss = loss + self.auxiliary_weight * class_loss
        loss.backward()
        return loss, logits

    def generator_step(self) -> tuple[float, float]:
        """One step of the non-saturating generator loss through the frozen discriminator
        (as it is after the discriminator step, or with simultaneous steps its snapshot from
        before it), plus the marginal loss.

        Returns G's loss and D's loss on the same fresh fake batch: both depend on private data
        only through D, so (unlike any loss on real rows) they are safe to report.
        """
        self._decide_update(go=True)  # no D step since the half was prepared: none waits
        half, self._generator_half = self._generator_half, None
        if half is None:
            if self.critic_snapshot is not None:  # a snapshot now would be D after its step
                raise RuntimeError("simultaneous steps: prepare_generator_step comes first")
            half = self._generator_inputs()
        elif isinstance(half, Future):
            half = half.result()
        if half.losses is None:
            half.losses = self._update_generator(half)
        return half.losses

    def _decide_update(self, go: bool) -> None:
        """Let G's update waiting on its thread for D's fakes go ahead, or call it off (if
        already let go, it has gone ahead). The gate is decided before it is dropped, so a
        cleanup interrupted in between still finds it."""
        if self._fakes_gate is not None:
            self._fakes_gate.decide(go)
            self._fakes_gate = None

    def _update_generator(self, half: _GeneratorInputs) -> tuple[float, float]:
        """G's update from ``half`` (its adversarial loss through D after D's step, unless
        already taken through the snapshot), and its moving average; G's and D's losses."""
        if half.adversarial is None:
            with self.critic.frozen() as discriminator:  # backward inside: D's hooks stay off
                half.adversarial = self._adversarial_backward(discriminator, half)
        loss, logits = half.adversarial
        distributed.reduce_gradients(self.generator, average=True)
        self.generator_optimizer.step()
        if self.generator_average is not None:
            self.generator_average.update_parameters(self.generator)
        d_fake_loss = F.binary_cross_entropy_with_logits(logits.detach(), torch.zeros_like(logits))
        return float(loss.detach()) + half.marginal_loss, float(d_fake_loss)

    def discard_prepared(self) -> None:
        """Wait for a prepared generator half that will not be used (the discriminator step
        failed or was interrupted), so that no thread is left writing G's gradients (or, once
        D's fakes were drawn, its weights)."""
        self._decide_update(go=False)  # D's step failed before its fakes: G keeps its weights
        half, self._generator_half = self._generator_half, None
        if isinstance(half, Future):
            wait([half])

    def close(self) -> None:
        """Stop the generator's thread (idempotent), calling off an update still waiting for a
        D step."""
        self._decide_update(go=False)
        self.critic.draw_noise_ahead(None)  # (a draw made ahead that failed is dropped too)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def averaged_steps(self) -> int:
        """G steps the moving average covers (0 without one)."""
        average = self.generator_average
        return 0 if average is None else int(average.n_averaged)

    def finish(self) -> None:
        """Give G the moving average of its weights (when kept), the generator a run saves."""
        if self.generator_average is not None and self.generator_average.n_averaged > 0:
            self.generator.load_state_dict(self.generator_average.module.state_dict())

    def generator_step_precision(self) -> AbstractContextManager[object]:
        """Where G's step runs its networks: in bfloat16 under autocast when asked for and
        native to the device, else as they are. Only the generator step uses it: it sees no
        real row and no secret draw, so its precision is a matter of speed and quality alone;
        the private discriminator step, and the fakes it pairs with real rows, stay float32."""
        if not self.bf16_generator_step:
            return nullcontext()
        return torch.autocast(self.label_probs.device.type, dtype=torch.bfloat16)

    def marginal_loss(self) -> torch.Tensor:
        """KL divergence from each released distribution to G's: every column's within each
        class, and every released pair's over the whole table.

        The same number of rows for every class, so a rare class counts as much as a common
        one in the per-class terms (the pair terms weigh classes by their released shares);
        KL rather than a squared distance, so a missing spike (say, 47% of rows at "40 hours")
        costs G as much as it shows to a person. Given (z, y), G draws each column's code
        independently, so the mean over rows of an outer product of code probabilities is
        exactly G's joint distribution of a pair.
        """
        assert self.marginals is not None
        n_classes = self.marginals.shape[0]
        device = self.marginals.device
        codes = torch.arange(n_classes, device=device).repeat_interleave(self.marginal_rows)
        z = torch.randn(len(codes), self.generator.latent_dim, device=device)
        with self.generator_step_precision():  # (the KL terms below stay in float32)
            probs = self.generator.code_probs(z, F.one_hot(codes, n_classes).float())
        model = probs.view(n_classes, self.marginal_rows, -1).mean(dim=1)
        # The mean over classes and columns of each column's KL.
        loss = _kl_terms(self.marginals, model).sum(-1).mean() / self.marginal_columns
        if self.pairs is not None:
            weights = self.label_probs[codes] / self.label_probs.sum() / self.marginal_rows
            loss = loss + self.pairs.kl(probs, weights).mean()
        return loss


def _geometric_average(
    decay: float,
) -> Callable[[list[torch.Tensor], list[torch.Tensor], torch.Tensor], None]:
    """The update of an exponential moving average normalised over the iterates so far:
    iterate t of T weighs decay^(T-t) (1-decay) / (1-decay^T). The plain moving average,
    started from the first iterate, would keep decay^(T-1) of it: a third after 100 steps
    of 0.99, a short run's nearly untrained weights. All of G's tensors in one call
    (``multi_avg_fn``): a loop over them cost more than the arithmetic."""

    def update(
        averages: list[torch.Tensor], currents: list[torch.Tensor], count: torch.Tensor
    ) -> None:
        weight = (1 - decay) / (1 - decay ** (int(count) + 1))  # count: iterates averaged
        torch._foreach_lerp_(averages, currents, weight)  # average + (current - average) * w

    return update


def _kl_terms(target: torch.Tensor, model: torch.Tensor) -> torch.Tensor:
    """Each cell's term of KL(target || model); summed over a distribution's cells, the KL
    (cells where the target is 0 add nothing)."""
    log_ratio = target.clamp_min(1e-12).log() - model.clamp_min(1e-12).log()
    return torch.where(target > 0, target * log_ratio, 0.0)


# Padded cells (of a pair's longer side) a bucket of pairs must save to be worth its own
# batched product. On Adult's 26 pairs, 100-300 timed alike (2 buckets: 20 and 42 wide),
# 2 ms a generator step faster than one layout padded to 42 x 42.
PAIR_BUCKET_COST = 100


class _PairTargets:
    """The released pairs' joint distributions, in a few padded batches of pairs of similar
    size: a loop over pairs (26 on Adult) cost ~12 ms a generator step in small matrix
    products, one batch padded to the widest pair ~4 ms."""

    def __init__(self, marginals: Marginals, device: torch.device):
        # A released table may have coarse cells no code maps to (so: the widest of both).
        self.coarse = max(
            [1, *(max(t.shape) for t in marginals.joint)]
            + [int(m.max()) + 1 for m in marginals.maps if len(m)]
        )
        self.columns = len(marginals.maps)
        # Each code's cell (codes side by side, as in ``Generator.code_probs``) in a [column,
        # coarse code] layout: adding probabilities there sums them into coarse cells.
        self.cells = torch.cat(
            [column * self.coarse + torch.as_tensor(m) for column, m in enumerate(marginals.maps)]
        ).to(device)
        # Each pair with its shorter side first (KL is the same for a transposed joint).
        pairs, tables = [], []
        for (i, j), joint in zip(marginals.pairs, marginals.joint, strict=True):
            if joint.shape[0] > joint.shape[1]:
                (i, j), joint = (j, i), joint.T
            reach = [int(marginals.maps[c].max()) + 1 for c in (i, j)]
            if reach[0] > joint.shape[0] or reach[1] > joint.shape[1]:
                raise ValueError(f"pair {(i, j)}: codes map outside its {joint.shape} table")
            pairs.append((i, j))
            tables.append(joint)
        buckets = width_buckets([t.shape[1] for t in tables], PAIR_BUCKET_COST)
        self.buckets = []  # (first columns, second columns, [pair, rows, columns] targets)
        for bucket in buckets:
            shape = [max(tables[p].shape[side] for p in bucket) for side in (0, 1)]
            targets = torch.zeros(len(bucket), *shape, device=device)
            for k, p in enumerate(bucket):
                rows, columns = tables[p].shape
                targets[k, :rows, :columns] = torch.as_tensor(tables[p])
            first, second = (
                torch.tensor([pairs[p][side] for p in bucket], device=device) for side in (0, 1)
            )
            self.buckets.append((first, second, targets))
        # The pairs' order from the buckets'.
        self.order = torch.argsort(torch.tensor([p for b in buckets for p in b], device=device))

    def kl(self, probs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """[pair] KL(released joint || G's), where G's joint is the ``weights``-weighted sum
        over rows of the outer product of the pair's coarse code probabilities
        (``probs``: [rows, codes], as :meth:`Generator.code_probs` lays them out)."""
        # [column, coarse code, row], each slice contiguous for the batched products below.
        coarse = probs.new_zeros(self.columns * self.coarse, len(probs))
        coarse = coarse.index_add(0, self.cells, probs.t()).view(self.columns, self.coarse, -1)
        weighted = coarse * weights
        kl = []
        for first, second, targets in self.buckets:
            rows, columns = targets.shape[1:]
            joint = torch.bmm(
                weighted[:, :rows].index_select(0, first),
                coarse[:, :columns].index_select(0, second).transpose(1, 2),
            )
            kl.append(_kl_terms(targets, joint).sum((1, 2)))
        return torch.cat(kl).index_select(0, self.order)


# Generator steps per block of the pacer, and the steps of each way it times at a block's start.
PACE_BLOCK = 100
PACE_PROBE = 5


class _Pacer:
    """Whether G's half of each step runs beside the discriminator step or before it, chosen
    block by block by timing both ways. Beside is faster on a quiet 2-core machine; with
    another process holding a core, the two threads share one and the step is slower than one
    thread's (results/speed.md, quiet and loaded). The times are of whole steps, so they, and
    the choice, depend on the realised batch sizes (private): no output depends on the choice,
    as both ways compute the same bits (tested in float32 and under bfloat16 autocast), and the
    choice is neither saved nor reported."""

    def __init__(self) -> None:
        self.steps = 0  # generator steps paced so far
        self.times: dict[bool, list[float]] = {True: [], False: []}
        self.choice = True

    def beside(self) -> bool:
        """For the next generator step: the first PACE_PROBE of a block beside, the next
        PACE_PROBE not, the rest as the faster (median) of the two."""
        position = self.steps % PACE_BLOCK
        self.steps += 1
        if position == 0:
            self.times = {True: [], False: []}
        if position < 2 * PACE_PROBE:
            return position < PACE_PROBE
        if position == 2 * PACE_PROBE:
            beside, after = (statistics.median(self.times[way]) for way in (True, False))
            self.choice = beside <= after
        return self.choice

    def record(self, beside: bool, seconds: float) -> None:
        self.times[beside].append(seconds)


def run_steps(
    trainer: CGANTrainer,
    ledger: PrivacyLedger,
    config: TrainConfig,
    first: int,
    last: int,
    saver: Checkpointer | None,
    earlier: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Alternate ``n_critic`` private D steps with one G step, steps ``first``..``last``.

    Returns the per-epoch records, ``earlier`` ones (of the steps before a resume) first;
    checkpoints hold them all, so a chain of resumes loses none. A record holds only
    quantities that are private by post-processing (losses on generated rows, epsilon so
    far), so ``metrics.json`` can be shared. Ctrl-C stops after the current step with a
    checkpoint (when checkpointing) and raises
    :class:`TrainingInterrupted`. A step that fails raises with nothing saved after the last
    checkpoint (with simultaneous steps beside, G may have taken that step's update once D's
    step drew its fakes; no checkpoint ever holds it).
    """
    n_critic = config.n_critic
    steps_per_epoch = max(1, round(1.0 / trainer.sample_rate))
    history = list(earlier)
    g_losses: list[tuple[float, float]] = []
    shown = config.progress and distributed.rank() == 0  # one bar under torchrun
    pacer = _Pacer() if trainer.has_second_thread else None
    bar = tqdm(total=last, initial=first - 1, disable=not shown, unit="step")
    with stop_on_sigint() as stop:
        for step in range(first, last + 1):
            if saver is not None:
                saver.before(step, last)
            generator_step = step % n_critic == 0
            start = time.perf_counter()
            beside = generator_step and pacer is not None and pacer.beside()
            try:
                if generator_step:
                    trainer.prepare_generator_step(beside)
                trainer.discriminator_step()
            except BaseException:
                trainer.discard_prepared()
                raise
            if generator_step:
                g_losses.append(trainer.generator_step())
                if pacer is not None:
                    pacer.record(beside, time.perf_counter() - start)
            bar.update(1)
            if step % steps_per_epoch == 0 or step == last:
                g_loss, d_loss = np.mean(g_losses, axis=0).tolist() if g_losses else (None, None)
                record = {
                    "epoch": math.ceil(step / steps_per_epoch),
                    "step": step,
                    "g_loss": g_loss,
                    "d_loss_on_fakes": d_loss,
                    "epsilon": ledger.epsilon() if ledger.private else None,
                }
                history.append(record)
                bar.set_postfix(
                    {
                        k: "n/a" if record[k] is None else f"{record[k]:.3f}"
                        for k in ("epsilon", "g_loss", "d_loss_on_fakes")
                    }
                )
                g_losses = []
            if saver is not None:
                saver.after(step, last, history)
            if distributed.any_rank(stop.requested) and step < last:
                if saver is not None:
                    saver.save(step, history)
                bar.close()
                raise TrainingInterrupted(step, last)
    bar.close()
    return history


class TrainingInterrupted(RuntimeError):
    """Ctrl-C stopped training cleanly after a step; the checkpoint allows a resume."""

    def __init__(self, step: int, last: int):
        super().__init__(f"training interrupted after step {step} of {last}")
        self.step, self.last = step, last


class _StopFlag:
    requested = False


@contextmanager
def stop_on_sigint() -> Iterator[_StopFlag]:
    """First Ctrl-C: finish the current step, then stop; a second one stops at once."""
    flag = _StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.getsignal(signal.SIGINT)

    def request_stop(signum: int, frame: Any) -> None:
        if flag.requested:
            raise KeyboardInterrupt
        flag.requested = True

    signal.signal(signal.SIGINT, request_stop)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)
