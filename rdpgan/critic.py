"""The discriminator's optimizer, and how many steps it takes: DP-SGD opened in the ledger
(sigma calibrated to what the budget leaves, or given, and the steps it allows), or its
non-private twin for a run without privacy."""

from __future__ import annotations

import math

import torch

from rdpgan.config import PrivacyConfig, TrainConfig
from rdpgan.errors import UserInputError
from rdpgan.models import Discriminator
from rdpgan.privacy.dp_sgd import DPSGD, PlainSGD
from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.privacy.randomness import SecretRandomness


def make_critic(
    discriminator: Discriminator,
    d_opt: torch.optim.Optimizer,
    ledger: PrivacyLedger,
    privacy: PrivacyConfig,
    train: TrainConfig,
    sample_rate: float,
    expected_batch: int,
    secret: SecretRandomness,
    first_step: int = 1,
) -> tuple[DPSGD | PlainSGD, int]:
    """Wrap D for DP-SGD and decide how many discriminator steps are left to take."""
    planned = train.steps or max(1, _capped(steps_for(train.epochs, sample_rate), train.max_steps))
    if not ledger.private:
        return PlainSGD(discriminator, d_opt, expected_batch), planned
    if first_step > 1:  # resumed: the DP-SGD release is already open
        release = ledger.releases[-1]
        if release.sample_rate != sample_rate:  # the mask must realise the charged rate
            raise UserInputError("the checkpoint's sampling rate does not match its ledger")
    else:
        release = _open_dp_sgd(ledger, privacy, train, planned, sample_rate, expected_batch)
    steps = max(0, ledger.steps_left(release))
    if steps == 0 and first_step == 1:
        raise UserInputError(
            f"epsilon={ledger.epsilon_target:g} is spent before the first discriminator step "
            "(raise epsilon or privacy.noise_multiplier)"
        )
    critic = DPSGD(
        discriminator,
        d_opt,
        ledger=ledger,
        release=release,
        max_grad_norm=privacy.max_grad_norm,
        expected_batch_size=expected_batch,
        secret=secret,
    )
    return critic, steps


def _open_dp_sgd(
    ledger: PrivacyLedger,
    privacy: PrivacyConfig,
    train: TrainConfig,
    planned: int,
    sample_rate: float,
    expected_batch: int,
) -> Release:
    """Fix sigma (calibrated, or given) and the step limit the budget allows."""
    if privacy.noise_multiplier is None:
        sigma = ledger.calibrate(sample_rate, planned, ledger.gaussian_budget())
        cap = planned
    else:
        sigma = float(privacy.noise_multiplier)
        by_epochs = 10**9 if train.max_epochs is None else steps_for(train.max_epochs, sample_rate)
        cap = _capped(by_epochs, train.max_steps)
    return ledger.open_dp_sgd(
        "dp_sgd_discriminator",
        sigma,
        sample_rate,
        cap,
        max_grad_norm=privacy.max_grad_norm,
        expected_batch_size=expected_batch,
    )


def _capped(steps: int, cap: int | None) -> int:
    return steps if cap is None else min(steps, cap)


def steps_for(epochs: float, sample_rate: float) -> int:
    """Steps in ``epochs`` passes at ``sample_rate``, rounded first: the exact rate sits a hair
    below the nominal one (1/q of 0.1 must be 10 steps, not 11)."""
    return math.ceil(round(epochs / sample_rate, 6))
