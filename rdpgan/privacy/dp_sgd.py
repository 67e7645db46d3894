"""DP-SGD for one module: Poisson sampling, per-sample clipping, Gaussian noise, one charge a step.

This is the wiring Opacus's ``PrivacyEngine.make_private`` does, done by hand for three reasons:
(1) our batches are row indices into one tensor, drawn by a vectorised Poisson sampler
(:meth:`SecretRandomness.poisson_indices`), which is far faster than a DataLoader over single
rows; (2) the ledger, not a hidden accountant hook, charges each step, before its noisy update
is used; (3) the noise comes from a :class:`SecretRandomness` of its own, a step ahead on a
spare thread (:class:`StepNoise`; Opacus's own generator argument takes a ``torch.Generator``,
whose CPU state is seeded from 64 bits at most). The
clipping is ours (:mod:`rdpgan.privacy.clipping`): per-sample gradient norms and the clipped sum
from one backward pass, where Opacus's ghost clipping takes two; the optimizer that adds the
noise and steps is Opacus's.

A "sample" is whatever the module's first dimension indexes. The GAN trainer passes [B, 2, F]
tensors, one (real row, fake row) pair per sample, so each pair's joint gradient is clipped as
one unit: adding or removing a private row adds or removes exactly one clipped term.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, Future, wait
from contextlib import contextmanager
from typing import Any

import torch
from opacus.optimizers import (
    DistributedDPOptimizerFastGradientClipping,
    DPOptimizerFastGradientClipping,
)
from opacus.optimizers.optimizer import _check_processed_flag, _mark_as_processed
from torch import nn

from rdpgan import distributed
from rdpgan.privacy.clipping import LinearClipper
from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.privacy.randomness import NOISE_STREAM, SecretRandomness


@contextmanager
def _frozen_parameters(module: nn.Module) -> Iterator[None]:
    params = [p for p in module.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


class StepNoise:
    """Each private step's Gaussian noise, N(0, ``std``^2) on every coordinate of every
    parameter, from a secret source of its own (:meth:`SecretRandomness.independent`).

    With :meth:`draw_ahead_on`, the next step's noise is drawn on that executor's thread while
    this step runs: it depends on nothing of the step (drawing it is about a tenth of a
    private step on Adult's critic), and each draw is handed out once, in order.
    """

    def __init__(self, secret: SecretRandomness, params: list[torch.Tensor], std: float):
        self.secret = secret.independent(NOISE_STREAM)
        self.params = params
        self.std = std
        self.executor: Executor | None = None
        self.ahead: Future[list[torch.Tensor]] | None = None

    def draw_ahead_on(self, executor: Executor | None) -> None:
        """Draw each step's successor's noise on ``executor`` (None: when it is needed)."""
        self.stop()
        self.executor = executor

    def take(self) -> list[torch.Tensor]:
        """This step's noise, one tensor per parameter; the next step's starts on the
        executor. (The trainer's one-thread executor then runs it before the generator's
        next task, which waits for the next discriminator step to draw its fakes: the noise
        never waits behind it.)"""
        ahead, self.ahead = self.ahead, None
        noise = self._draw() if ahead is None else ahead.result()
        if self.executor is not None:
            self.ahead = self.executor.submit(self._draw)
        return noise

    def stop(self) -> None:
        """Stop drawing ahead, and drop the noise drawn ahead (never used: nothing depends on
        it, nor on whether its draw failed)."""
        ahead, self.ahead, self.executor = self.ahead, None, None
        if ahead is not None and not ahead.cancel():
            wait([ahead])

    def _draw(self) -> list[torch.Tensor]:
        return [self.secret.gaussian_noise(p, self.std) for p in self.params]


class _SecretNoiseExpectedMean(DPOptimizerFastGradientClipping):
    """Opacus's optimizer over sums already clipped, with noise from the secret source and the
    *expected* batch size.

    With ``loss_reduction="sum"`` Opacus leaves the noisy sum unscaled; dividing by the realised
    batch size would be data-dependent (and undefined for an empty batch).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, secret: SecretRandomness, **kwargs: Any):
        super().__init__(optimizer, **kwargs)
        self.noise = StepNoise(secret, self.params, self.noise_multiplier * self.max_grad_norm)

    def add_noise(self) -> None:
        if self.noise.std != self.noise_multiplier * self.max_grad_norm:
            raise RuntimeError("the noise's std is not sigma times the clipping norm")
        noise = self.noise.take()
        if [draw.shape for draw in noise] != [p.summed_grad.shape for p in self.params]:
            raise RuntimeError("the noise does not match the parameters it is for")
        for p, draw in zip(self.params, noise, strict=True):
            _check_processed_flag(p.summed_grad)  # Opacus's guard: never noise a sum twice
            p.grad = (p.summed_grad + draw).view_as(p)
            _mark_as_processed(p.summed_grad)

    def scale_grad(self) -> None:
        for p in self.params:
            p.grad /= self.expected_batch_size


class _DistributedSecretNoise(_SecretNoiseExpectedMean, DistributedDPOptimizerFastGradientClipping):
    """Under ``torchrun``: each rank clips its own rows; rank 0 alone adds the noise, and
    Opacus's distributed optimizer then sums the ranks' gradients, so every rank steps with
    (sum of all clipped gradients + one noise draw) / expected global batch."""

    def add_noise(self) -> None:
        if self.rank == 0:
            super().add_noise()
            return
        for p in self.params:  # the clipped sum alone, with Opacus's guard as on rank 0
            _check_processed_flag(p.summed_grad)
            p.grad = p.summed_grad.view_as(p)
            _mark_as_processed(p.summed_grad)


class DPSGD:
    """A module and its optimizer made private; :meth:`step` takes per-sample losses."""

    def __init__(
        self,
        module: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        ledger: PrivacyLedger,
        release: Release,
        max_grad_norm: float,
        expected_batch_size: int,
        secret: SecretRandomness,
    ):
        self.ledger = ledger
        self.release = release
        self.module = module
        self.clipper = LinearClipper(module, max_grad_norm)
        optimizer_class = (
            _DistributedSecretNoise if distributed.world_size() > 1 else _SecretNoiseExpectedMean
        )
        self.optimizer = optimizer_class(
            optimizer,
            secret,
            noise_multiplier=release.noise_multiplier,
            max_grad_norm=max_grad_norm,
            expected_batch_size=expected_batch_size,
            loss_reduction="sum",
        )

    def zero_grad(self) -> None:
        """Clear the gradients, and what forward passes before this step's recorded."""
        self.optimizer.zero_grad(set_to_none=True)
        self.clipper.forget()

    def draw_noise_ahead(self, executor: Executor | None) -> None:
        """Draw each step's noise during the step before, on ``executor``'s thread (None:
        stop, dropping a draw made ahead)."""
        self.optimizer.noise.draw_ahead_on(executor)

    def step(self, per_sample_loss: torch.Tensor) -> None:
        """Clip each sample's gradient, add noise, update; the ledger is charged first."""
        self.ledger.charge(self.release)
        self.optimizer.zero_grad(set_to_none=True)  # Opacus adds p.grad to a sum left over
        self.clipper.clipped_backward(per_sample_loss)
        self.optimizer.step()

    @contextmanager
    def frozen(self) -> Iterator[nn.Module]:
        """Use the module as a fixed function (e.g. for the generator's loss through D).

        Recording off and parameters frozen, so nothing from this pass can reach the next
        private step.
        """
        with self.clipper.paused(), _frozen_parameters(self.module):
            yield self.module


class PlainSGD:
    """The same interface without privacy: the non-private baseline trains identically."""

    def __init__(
        self, module: nn.Module, optimizer: torch.optim.Optimizer, expected_batch_size: int
    ):
        self.module = module
        self.optimizer = optimizer
        self.expected_batch_size = expected_batch_size

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def draw_noise_ahead(self, executor: Executor | None) -> None:
        """No noise to draw."""

    def step(self, per_sample_loss: torch.Tensor) -> None:
        (per_sample_loss.sum() / self.expected_batch_size).backward()
        distributed.reduce_gradients(self.module, average=False)  # the global batch's mean
        self.optimizer.step()

    @contextmanager
    def frozen(self) -> Iterator[nn.Module]:
        with _frozen_parameters(self.module):
            yield self.module
