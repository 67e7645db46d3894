"""The run's settings checked before anything is released: a bad value would otherwise fail
late (after a release, with its privacy spent) or deep inside numpy or torch."""

from __future__ import annotations

import numpy as np

from rdpgan.config import ModelConfig, PrivacyConfig, TrainConfig
from rdpgan.errors import UserInputError
from rdpgan.privacy.budget import check_accountant
from rdpgan.sampler import check_sample_pool
from rdpgan.threads import policy_threads


def budget_shares(privacy: PrivacyConfig, marginals: bool = True) -> float:
    """The shares of epsilon the settings give releases other than DP-SGD (with the marginals:
    ``model.marginal_weight`` > 0); DP-SGD has at least the rest."""
    marginals_share = (
        privacy.marginals_fraction + privacy.selection_fraction + privacy.adaptive_fraction
    )
    return privacy.numeric_density_fraction + (marginals_share if marginals else 0.0)


def validate_settings(privacy: PrivacyConfig, model: ModelConfig, train: TrainConfig) -> None:
    """Settings that would otherwise fail late (after a release) or deep inside numpy or torch."""
    check_accountant(privacy.accountant)
    sigma = privacy.noise_multiplier
    positive = {
        "train.batch_size": train.batch_size,
        "train.epochs": train.epochs,
        "train.n_critic": train.n_critic,
        "train.steps": 1 if train.steps is None else train.steps,
        "train.max_steps": 1 if train.max_steps is None else train.max_steps,
        "privacy.max_grad_norm": privacy.max_grad_norm,
        "privacy.label_noise_multiplier": privacy.label_noise_multiplier,
        "privacy.noise_multiplier": 1.0 if sigma is None else sigma,
        "train.generator_lr": train.generator_lr,
        "train.discriminator_lr": train.discriminator_lr,
    }
    for name, value in positive.items():
        if not value > 0:
            raise UserInputError(f"{name} must be positive, got {value}")
    counts = {"train.steps": train.steps, "train.max_steps": train.max_steps}
    for name, value in counts.items():  # a fraction would fail in calibration, after releases
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise UserInputError(f"{name} must be a whole number, got {value}")
    if not 0.0 < train.checkpoint_share <= 1.0:
        raise UserInputError(
            f"train.checkpoint_share must be in (0, 1], got {train.checkpoint_share}"
        )
    every = train.checkpoint_every
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise UserInputError(
            f"train.checkpoint_every must be a whole number >= 0 (0: by share), got {every}"
        )
    policy_threads(train.threads)
    rate = train.max_sample_rate
    if not 0.0 < rate <= 1.0:
        raise UserInputError(f"train.max_sample_rate must be in (0, 1], got {rate}")
    for name, fraction in (
        ("privacy.marginals_fraction", privacy.marginals_fraction),
        ("privacy.selection_fraction", privacy.selection_fraction),
    ):
        if model.marginal_weight > 0 and not 0.0 < fraction < 1.0:
            raise UserInputError(f"{name} must be in (0, 1), got {fraction}")
    for name, fraction in (
        ("privacy.numeric_density_fraction", privacy.numeric_density_fraction),
        ("privacy.adaptive_fraction", privacy.adaptive_fraction),
    ):
        if not 0.0 <= fraction < 1.0:
            raise UserInputError(f"{name} must be in [0, 1), got {fraction}")
    shares = budget_shares(privacy, model.marginal_weight > 0)
    if shares >= 1.0:
        raise UserInputError(
            "privacy.marginals_fraction + selection_fraction + adaptive_fraction + "
            f"numeric_density_fraction must be below 1 (DP-SGD needs the rest), got {shares:g}"
        )
    for name, count in (
        ("model.numeric_bins", model.numeric_bins),
        ("model.marginal_rows", model.marginal_rows),
    ):
        if count < 1:
            raise UserInputError(f"{name} must be at least 1, got {count}")
    check_sample_pool("model.sample_pool", model.sample_pool)
    check_sample_pool("model.herding_pool", model.herding_pool)
    for name, switch in (
        ("model.tilt_sampling", model.tilt_sampling),
        ("model.herding_pairs", model.herding_pairs),
    ):
        if switch is not None and not isinstance(switch, (bool, np.bool_)):
            raise UserInputError(f"{name} must be true, false or null, got {switch!r}")
    if privacy.noise_seed is not None and privacy.noise_seed < 0:
        raise UserInputError(f"privacy.noise_seed must be >= 0, got {privacy.noise_seed}")
    ema = train.generator_ema
    if isinstance(ema, bool) or not isinstance(ema, (int, float)) or not 0.0 <= ema < 1.0:
        raise UserInputError(f"train.generator_ema must be in [0, 1), got {train.generator_ema}")
    if len(train.betas) != 2 or not all(0.0 <= b < 1.0 for b in train.betas):
        raise UserInputError(f"train.betas must be two numbers in [0, 1), got {train.betas}")
