"""DPCGAN: a conditional GAN whose discriminator is trained with DP-SGD.

``fit(df)`` spends the privacy budget in up to four releases, all composed in one ledger:
1. the label histogram (:func:`rdpgan.measure.label_counts`), which the generator samples
   labels from (its noisy total also stands in for the row count wherever one is needed);
2. the densities of the wide numeric columns (:func:`rdpgan.measure.numeric_densities`),
   which cut their bins at equal released mass and place each sampled number within its bin;
3. with ``model.marginal_weight > 0``, the marginals (:func:`rdpgan.measure.release_marginals`:
   each feature's code distribution per class, a private choice of column pairs and their
   joint tables), which the generator's marginal loss matches and sampling is tilted toward
   where they are precise, and raked toward with ``model.sample_pool`` > 1
   (:mod:`rdpgan.postprocess`);
4. DP-SGD on the discriminator (Poisson sampling, per-sample clipping, Gaussian noise).
The generator only ever sees the discriminator's outputs and these releases, so it and every
sample drawn from it are private by post-processing. ``sample(n)`` / ``save(dir)`` /
``DPCGAN.load(dir)`` complete the scikit-learn style API.
"""

from __future__ import annotations

import math
import numbers
import pickle
import threading
import warnings
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import torch
from torch.nn import functional as F

from rdpgan import checkpoint, distributed, measure, postprocess
from rdpgan.checkpoint import Checkpointer
from rdpgan.config import (
    ColumnSpec,
    ModelConfig,
    PrivacyConfig,
    TrainConfig,
    public_privacy_settings,
    with_absent_train_settings,
)
from rdpgan.data.discretize import table_sizes
from rdpgan.data.schema import Schema
from rdpgan.data.target import check_target
from rdpgan.errors import UserInputError
from rdpgan.io import atomic_write, read_json, write_json
from rdpgan.models import Discriminator, Generator, native_bf16
from rdpgan.privacy.dp_sgd import DPSGD, PlainSGD
from rdpgan.privacy.ledger import (
    LEDGER_FILE,
    PrivacyLedger,
    Release,
    check_accountant,
    validate_budget,
)
from rdpgan.privacy.private_schema import SchemaRelease
from rdpgan.privacy.randomness import (
    FIT_STREAM,
    RANK_STREAM,
    SecretRandomness,
    exact_sample_rate,
)
from rdpgan.training import CGANTrainer, adam_optimizers, run_steps
from rdpgan.transform import TableTransformer

# 2: G normalises rows with LayerNorm (format 1's BatchNorm coupled the rows of a batch).
# 3: numeric columns as codes (bins, point masses, missing) plus a within-bin position, and
#    released marginals instead of class profiles.
# 4: wide numeric columns cut at equal mass of a released density, positions drawn from it
#    (the generator no longer emits a position).
MODEL_FORMAT = 4
# What a training checkpoint must hold (see rdpgan.checkpoint.Checkpointer.save).
CHECKPOINT_META = ("model", "history", "finished", "step")
CHECKPOINT_TENSORS = (
    "generator",
    "discriminator",
    "generator_optimizer",
    "discriminator_optimizer",
    "rng",
)
# Rows per generator pass when sampling: each pass's tensors (rows × ~436 floats) then stay near
# the cache. On 2 CPU workers, passes of 2k, 4k and 16k rows ran alike, within 2%
# (scripts/bench_sampling.py); 4k keeps a pass's memory small.
SAMPLE_CHUNK = 4_096
# Generated rows held at once when raking: output rows are raked in blocks of RAKING_ROWS //
# sample_pool (131,072 at a pool of 4), each matched to the released marginals on its own, so
# memory does not grow with the pool (nor with n).
RAKING_ROWS = 524_288
# With model.sample_pool null, sampling rakes a pool of RAKING_POOL generated rows per row kept
# where the noise std on one released count of the marginals (the most over their releases) is
# at most RAKING_NOISE_LIMIT of the released row count, and keeps every generated row where it
# is larger: matching noisier tables fits their noise. On Adult's validation split (round 15
# of results/tuning_adult.csv), raking cut 2-/3-way TVD by a fifth at ε=8 (noise 5.3e-4 of the
# rows) for ~0.003 of AUROC, and cost AUROC and 1-/2-way TVD at ε=3 (1.3e-3) and ε=1 (3.6e-3);
# the limit sits between (about their geometric mean).
RAKING_POOL = 4
RAKING_NOISE_LIMIT = 8e-4
# With model.tilt_sampling null, sampling is tilted where the noise std on one released count
# of the marginals is at most TILT_NOISE_LIMIT of the released row count (the public quantity
# raking's rule reads). Derived from Adult's validation rounds alone by
# scripts/derive_tilt_limit.py (results/tilt_limit.md): the tilt lowered mean TVD up to a share
# of 3.6e-3 (ε=1) and not from 5.1e-3 (2,000 rows at ε=8); the limit is their geometric mean.
TILT_NOISE_LIMIT = 4.3e-3
# Latent draws per class that sampling's tilt is fitted on (rdpgan.postprocess.class_tilts):
# its residual error on a column's expected distribution is of order 1/sqrt(rows) of a
# code's spread over z, below the noise of the released marginals on Adult.
TILT_ROWS = 8_192
# The tilt's latent draws come from SeedSequence([model seed, TILT_STREAM]): fixed by the
# model, apart from every sampling call's own stream.
TILT_STREAM = 0x7117
# Of privacy.adaptive_fraction, the share for choosing the pairs (the rest measures them): AIM
# (McKenna et al. 2022) spends a tenth to a quarter on selection; a quarter here, as fewer
# rounds are run.
ADAPTIVE_SELECTION_SHARE = 0.25
# Rows the sampler generates to compare with the private rows when choosing adaptive pairs:
# their counts' sampling error (~1/sqrt(rows) of a cell) is below the released noise.
ADAPTIVE_ROWS = 65_536
# Adaptive pairs per column but one: fewer pairs, each measured with less noise.
ADAPTIVE_PAIRS_PER_COLUMN = 0.5
# A model.json without the setting is from before it: its rows were drawn untilted.
RECORDED_BEFORE_TILT = {"tilt_sampling": False}


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


SchemaLike = Schema | SchemaRelease | Sequence[ColumnSpec | dict]


def check_sample_pool(name: str, pool: int | None) -> None:
    """Null, or a whole number of generated rows per kept row from 1 to RAKING_ROWS (a larger
    pool leaves no row to keep): checked before training and sampling, since anything else
    fails only once sampling allocates the pool, after the privacy is spent."""
    if pool is None:
        return
    if isinstance(pool, bool) or not isinstance(pool, numbers.Integral):
        raise UserInputError(f"{name} must be a whole number, got {pool!r}")
    if not 1 <= pool <= RAKING_ROWS:
        raise UserInputError(f"{name} must be between 1 and {RAKING_ROWS}, got {pool}")


def _validate_settings(privacy: PrivacyConfig, model: ModelConfig, train: TrainConfig) -> None:
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
    checkpoints = {
        "train.checkpoint_every": train.checkpoint_every,
        "train.checkpoint_seconds": train.checkpoint_seconds,
        "train.first_checkpoint_seconds": train.first_checkpoint_seconds,
    }
    for name, value in checkpoints.items():
        if not (math.isfinite(value) and value >= 0):
            raise UserInputError(f"{name} must be a finite number >= 0 (0: off), got {value}")
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
    marginals_share = (
        privacy.marginals_fraction + privacy.selection_fraction + privacy.adaptive_fraction
    )
    shares = privacy.numeric_density_fraction + (
        marginals_share if model.marginal_weight > 0 else 0.0
    )
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
    if model.tilt_sampling is not None and not isinstance(model.tilt_sampling, (bool, np.bool_)):
        raise UserInputError(
            f"model.tilt_sampling must be true, false or null, got {model.tilt_sampling!r}"
        )
    if privacy.noise_seed is not None and privacy.noise_seed < 0:
        raise UserInputError(f"privacy.noise_seed must be >= 0, got {privacy.noise_seed}")
    ema = train.generator_ema
    if isinstance(ema, bool) or not isinstance(ema, (int, float)) or not 0.0 <= ema < 1.0:
        raise UserInputError(f"train.generator_ema must be in [0, 1), got {train.generator_ema}")
    if len(train.betas) != 2 or not all(0.0 <= b < 1.0 for b in train.betas):
        raise UserInputError(f"train.betas must be two numbers in [0, 1), got {train.betas}")


def _as_release(schema: SchemaLike) -> SchemaRelease:
    """Any schema as a release; a declared one (Schema or specs) is public and costs nothing."""
    if isinstance(schema, SchemaRelease):
        return schema
    return SchemaRelease(schema if isinstance(schema, Schema) else Schema.from_specs(schema))


class DPCGAN:
    """Differentially private conditional GAN for one table with a categorical target."""

    def __init__(
        self,
        epsilon: float = 8.0,
        delta: float = 1e-5,
        privacy: PrivacyConfig | None = None,
        model: ModelConfig | None = None,
        train: TrainConfig | None = None,
        seed: int = 0,
        device: str = "auto",
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.privacy = privacy or PrivacyConfig()
        self.model_config = model or ModelConfig()
        self.train_config = train or TrainConfig()
        self.seed = seed
        self.device = resolve_device(device)
        if self.privacy.accountant != "none":
            validate_budget(epsilon, delta)
        _validate_settings(self.privacy, self.model_config, self.train_config)
        self.generator: Generator | None = None
        self.transformer: TableTransformer | None = None
        self.ledger: PrivacyLedger | None = None
        self.label_probs: np.ndarray | None = None
        self.marginals: measure.Marginals | None = None
        # Released densities of the wide numeric columns, by name (empty: none released).
        self.densities: dict[str, list[float]] = {}
        # Whether the pairs chosen after training were drawn (or begun): never twice.
        self.adaptive_drawn = False
        self.positive_label: Any = None
        self.released_rows = 0
        # The noise std on one released count of the marginals, as model.json records it (a
        # fitted model reads it from its ledger).
        self.recorded_marginal_noise = 0.0
        self.metrics: dict[str, Any] = {}
        # Sampling's tilts by matrix-product precision, fitted at the first sample after
        # training or loading (concurrent sampling threads wait for one fit).
        self._tilts: dict[bool, list[list[torch.Tensor]]] = {}
        self._tilts_lock = threading.Lock()
        # Opt-outs of the run that trained this model (from its ledger, or model.json on load).
        self.privacy_notes: list[str] = []

    def __getstate__(self) -> dict[str, Any]:
        """A copy (pickle, deepcopy) without ``privacy.noise_seed``, which keys the secret noise
        and must stay where it was given (a copy that is fitted draws fresh OS entropy), the
        lock, which cannot be copied, or the tilts, which the copy fits again when it first
        samples."""
        state = dict(self.__dict__)
        state["privacy"] = replace(self.privacy, noise_seed=None)
        del state["_tilts_lock"]
        state["_tilts"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_tilts", {})  # (pickled before the tilt)
        self._tilts_lock = threading.Lock()

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        df: pd.DataFrame,
        target: str,
        schema: SchemaLike,
        positive_label: Any = None,
        checkpoint_dir: str | Path | None = None,
    ) -> DPCGAN:
        """Train on ``df`` (the private rows); domains come from ``schema`` alone.

        A :class:`SchemaRelease` (e.g. ``schema=private``) brings its cost and notes into this
        run's ledger, composed with everything else.

        With ``checkpoint_dir``, the training state is saved about every
        ``train.checkpoint_seconds`` (at most every ``train.checkpoint_every`` steps) so that
        :meth:`resume` can continue after a crash or Ctrl-C.
        """
        release = _as_release(schema)
        if release.releases and distributed.world_size() > 1:
            raise UserInputError(
                "a paid schema is released in one process: release it without torchrun, then "
                "declare it (schema.file=<run>/schema.yaml)"
            )
        checkpoint_dir = checkpoint_dir if distributed.rank() == 0 else None  # one writer
        self.charge_schema(release, checkpoint_dir)
        # Each later release reaches the file as soon as it is recorded, before its noise.
        self.ledger.on_record = lambda: self._ledger_to_disk(checkpoint_dir)
        schema = release.schema
        frame = _conformed(df, target, schema)
        # Equal-width bins, from the schema alone: what the densities are measured on.
        public = TableTransformer(schema, target, self.model_config.numeric_bins)
        labels = public.encode_labels(frame)
        distributed.refuse_unless_same(public.encode(frame), labels)  # one table, sharded
        self.positive_label = positive_label
        torch.manual_seed(self.seed)  # public randomness only: initialisation, G's own draws
        secret = self._secret(first_step=1)
        if distributed.rank() == 0:  # under torchrun, rank 0 releases and the others receive
            self._release_label_counts(labels, public.n_classes, secret.numpy)
            positions = public.positions(frame)
            self.densities = self._release_densities(positions, public.wide_columns, secret.numpy)
        self._share_releases()
        if distributed.world_size() > 1:  # (one process checked right after the label counts)
            self._check_row_count()
        self.transformer = TableTransformer(
            schema, target, self.model_config.numeric_bins, self.densities
        )
        features = self.transformer.encode(frame)
        if distributed.rank() == 0:
            self._release_marginals(features, labels, secret.numpy)
        self._share_releases()
        return self._train(features, labels, checkpoint_dir, secret)

    def _release_label_counts(
        self, labels: np.ndarray, n_classes: int, noise: np.random.Generator
    ) -> None:
        """The label histogram, released and recorded; its noisy total stands in for the row
        count everywhere after (δ's check first, so that a refused run spends less)."""
        assert self.ledger is not None
        released = measure.label_counts(
            labels, n_classes, self.ledger, self.privacy.label_noise_multiplier, noise
        )
        self.released_rows = max(1, round(float(released.sum())))
        if distributed.world_size() == 1:  # (under torchrun, every rank checks after sharing)
            self._check_row_count()
        self.label_probs = np.clip(released, 1.0, None) / np.clip(released, 1.0, None).sum()

    def _release_densities(
        self, positions: list[np.ndarray], names: list[str], noise: np.random.Generator
    ) -> dict[str, list[float]]:
        """The wide numeric columns' densities, released and recorded (none without a wide
        column, with ``privacy.numeric_density_fraction`` 0, or where the accountant cannot
        certify so small a share: all public facts)."""
        assert self.ledger is not None
        epsilon = self.privacy.numeric_density_fraction * self.ledger.gaussian_budget()
        if not positions or epsilon <= 0 or not measure.affordable(self.ledger, epsilon):
            return {}
        densities = measure.numeric_densities(positions, self.ledger, epsilon, noise)
        return {name: d.tolist() for name, d in zip(names, densities, strict=True)}

    def _release_marginals(
        self, features: np.ndarray, labels: np.ndarray, noise: np.random.Generator
    ) -> None:
        """The marginals G matches (with ``model.marginal_weight`` > 0), released and recorded."""
        assert self.transformer is not None and self.ledger is not None
        assert self.label_probs is not None
        if self.model_config.marginal_weight > 0 and self.transformer.code_sizes:
            self.marginals = measure.release_marginals(
                features,
                labels,
                self.transformer,
                self.label_probs,
                self.released_rows,
                self.ledger,
                self.privacy.marginals_fraction,
                self.privacy.selection_fraction,
                noise,
            )
            self._reserve_adaptive_pairs()

    def _reserve_adaptive_pairs(self) -> None:
        """Reserve the pairs chosen after training (:meth:`_adaptive_plan`) in the ledger,
        before DP-SGD, which is then calibrated to what is left."""
        assert self.ledger is not None
        rounds, selection, measured = self._adaptive_plan()
        if rounds:
            measure.reserve_adaptive_pairs(rounds, self.ledger, selection, measured)

    def _adaptive_plan(self) -> tuple[int, float, float]:
        """(pairs, epsilon of their choice, epsilon of their tables) chosen after training:
        ``privacy.adaptive_fraction`` of the budget (a quarter of it for the choice), only
        where sampling rakes (their one use) and only if their tables would be as precise as
        raking asks. How many is public: the candidates not yet released, at most
        ``ADAPTIVE_PAIRS_PER_COLUMN`` per column but one. Decided once, before DP-SGD."""
        assert self.ledger is not None and self.transformer is not None
        share = self.privacy.adaptive_fraction * self.ledger.gaussian_budget()
        if self.marginals is None or not self.marginals.pairs or share <= 0:
            return 0, 0.0, 0.0
        if self.raking_pool() == 1:
            return 0, 0.0, 0.0
        most = math.ceil(ADAPTIVE_PAIRS_PER_COLUMN * (len(self.transformer.code_sizes) - 1))
        rounds = min(most, len(self._open_pairs()))
        measured = share * (1 - ADAPTIVE_SELECTION_SHARE)
        if rounds and self.ledger.private:
            if not measure.affordable(self.ledger, measured):
                return 0, 0.0, 0.0
            sigma = self.ledger.calibrate(1.0, 1, measured, alone=True)
            if sigma * math.sqrt(rounds) > RAKING_NOISE_LIMIT * self.released_rows:
                return 0, 0.0, 0.0  # raking toward tables this noisy would fit their noise
        return rounds, share * ADAPTIVE_SELECTION_SHARE, measured

    def _open_pairs(self) -> list[tuple[int, int]]:
        """Candidate pairs (public: schema, budget, released row count) not yet released."""
        assert self.marginals is not None and self.ledger is not None
        assert self.transformer is not None
        sizes = table_sizes(self.transformer.features, measure.PAIR_BINS)
        share = self.privacy.adaptive_fraction * (1 - ADAPTIVE_SELECTION_SHARE)
        candidates = measure.pair_candidates(
            sizes, self.released_rows, self.ledger, share * self.ledger.epsilon_target
        )
        return [p for p in candidates if p not in set(self.marginals.pairs)]

    def _measure_where_g_is_wrong(self, features: np.ndarray, noise: np.random.Generator) -> bool:
        """After training: release the reserved pairs (without privacy: the planned ones),
        chosen where the sampler's output (a post-processing of everything released) is
        furthest from the rows, and add them to the marginals sampling rakes toward. Once per
        run: a resumed run that drew them (or may have) does not draw again. Returns whether
        any were drawn."""
        assert self.ledger is not None and self.transformer is not None
        if self.marginals is None or self.adaptive_drawn:
            return False
        if self.ledger.private:
            rounds = measure.reserved_rounds(self.ledger)
        else:
            rounds = self._adaptive_plan()[0]
        if not rounds:
            return False
        self.adaptive_drawn = True
        candidates = self._open_pairs()
        sizes = table_sizes(self.transformer.features, measure.PAIR_BINS)
        maps = self.marginals.maps
        coarse = measure.coarsen(self.transformer.codes(features), maps)
        model = measure.coarsen(self._sample_parts(ADAPTIVE_ROWS, None, self.seed)[1], maps)
        scale = self.released_rows / len(model)
        expected = [scale * c for c in measure.pair_counts(model, candidates, sizes)]
        pairs, joint = measure.adaptive_pairs(
            coarse, sizes, candidates, expected, rounds, self.released_rows, self.ledger, noise
        )
        self.marginals.pairs.extend(pairs)
        self.marginals.joint.extend(joint)
        return bool(pairs)

    def _share_releases(self) -> None:
        """Under torchrun: rank 0's released values and ledger on every rank (costs and noisy
        statistics only, which are safe to send), so that all ranks plan the same training."""
        if distributed.world_size() == 1:
            return
        assert self.ledger is not None
        shared = (
            self.label_probs,
            self.released_rows,
            self.densities,
            self.marginals,
            self.ledger.to_dict(),
        )
        (
            self.label_probs,
            self.released_rows,
            self.densities,
            self.marginals,
            ledger,
        ) = distributed.from_rank_zero(shared)
        if distributed.rank() != 0:
            self.ledger = PrivacyLedger.from_dict(ledger)

    def _secret(self, first_step: int) -> SecretRandomness:
        """The run's secret randomness (OS entropy unless ``privacy.noise_seed``); a resumed
        seeded run keys it with its first step, so it does not replay noise already used."""
        rank = distributed.rank()
        ranks = (RANK_STREAM, rank) if rank > 0 else ()  # rank 0 draws as one process would
        return SecretRandomness(self.privacy.noise_seed, FIT_STREAM, first_step, *ranks)

    def charge_schema(self, release: SchemaRelease, directory: str | Path | None) -> None:
        """Open the run's ledger with what the schema cost, and write it: ``fit`` starts here
        (a paid schema is recorded before anything can fail), and so does a run refused after
        its schema drew noise."""
        self.ledger = self._open_ledger(release)
        self._ledger_to_disk(directory)

    def _ledger_to_disk(self, directory: str | Path | None) -> None:
        """Releases made so far go into the run's ledger file at once: a later failure (say,
        DP-SGD calibration) must not leave noise drawn from the data unrecorded. A ledger with
        nothing spent is not written, so bad input found before any release leaves no file."""
        ledger = self.ledger
        if directory is not None and ledger is not None and ledger.private and ledger.releases:
            write_json(Path(directory) / LEDGER_FILE, ledger.to_dict())

    def _check_row_count(self) -> None:
        """δ must stay below 1/n, checked against the released (noisy) row count: whether a
        run refuses is then decided from a release, like everything after it, and not from
        the exact number of rows (at n ≈ 1/δ, one row would tell a refusal from a run)."""
        if self.privacy.accountant == "none":
            return
        try:
            validate_budget(self.epsilon, self.delta, n_rows=self.released_rows)
        except UserInputError as exc:
            raise UserInputError(
                f"{exc}; judged from the released label counts, which are spent (privacy.json)"
            ) from exc

    def _open_ledger(self, release: SchemaRelease) -> PrivacyLedger:
        """The ledger a fit starts from: the schema's own releases and opt-outs."""
        ledger = PrivacyLedger(self.epsilon, self.delta, self.privacy.accountant)
        if self.privacy.noise_seed is not None:
            ledger.use_seeded_noise()
        for note in release.notes:
            ledger.warn(note)
        for paid in release.releases:
            if ledger.private:
                ledger.record(paid)
        return ledger

    @classmethod
    def resume(
        cls,
        directory: str | Path,
        df: pd.DataFrame,
        device: str = "auto",
        noise_seed: int | None = None,
    ) -> DPCGAN:
        """Continue a checkpointed run on the same private rows.

        Steps charged before the crash stay charged (the ledger file is written ahead of the
        steps it covers), so the resumed run can only spend what is left of the budget. A run
        that has finished or spent its budget takes no step: the generator of its last
        checkpoint (its moving average, with ``train.generator_ema``) is returned (sampling
        from it costs no privacy). ``noise_seed`` is
        never saved with a run: pass it again for reproducible noise (the ledger then says
        the run is seeded), or leave it out for fresh OS entropy.
        """
        if distributed.world_size() > 1:
            raise UserInputError("a run is resumed in one process: resume it without torchrun")
        meta, tensors = checkpoint.load(directory, CHECKPOINT_META, CHECKPOINT_TENSORS)
        # The write-ahead ledger, not the checkpoint's copy: it may hold steps taken after it.
        ledger_path = Path(directory) / LEDGER_FILE
        if not ledger_path.is_file():
            raise UserInputError(f"{ledger_path} is missing; the privacy spent is unknown")
        try:
            model = cls._from_description(meta["model"], device)
            model.privacy.noise_seed = noise_seed
            _validate_settings(model.privacy, model.model_config, model.train_config)
            model.ledger = PrivacyLedger.from_dict(read_json(ledger_path))
            if noise_seed is not None:
                model.ledger.use_seeded_noise()
        except UserInputError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise UserInputError(
                f"the run in {directory} has a damaged checkpoint.json or privacy.json"
            ) from exc
        assert model.transformer is not None
        target, schema = model.transformer.target, model.transformer.schema
        frame = _conformed(df, target, schema)
        features = model.transformer.encode(frame)
        labels = model.transformer.encode_labels(frame)
        first_step = int(meta["step"]) + 1
        secret = model._secret(first_step)
        return model._train(features, labels, directory, secret, resume_from=(meta, tensors))

    @staticmethod
    def checkpoint_schema(directory: str | Path) -> Schema:
        """The schema the checkpointed run in ``directory`` encodes its rows with (what its
        rows must be read with to resume)."""
        meta, _ = checkpoint.load(directory, CHECKPOINT_META, CHECKPOINT_TENSORS)
        try:
            return Schema.from_specs(meta["model"]["schema"])
        except (KeyError, TypeError, ValueError) as exc:
            raise UserInputError(f"the run in {directory} has a damaged checkpoint.json") from exc

    def _train(
        self,
        features_rows: np.ndarray,
        label_codes: np.ndarray,
        checkpoint_dir: str | Path | None,
        secret: SecretRandomness,
        resume_from: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> DPCGAN:
        assert self.transformer is not None and self.label_probs is not None
        cfg = self.train_config
        # Under torchrun each rank trains on every world_size-th row (all of them otherwise).
        features = distributed.shard(torch.as_tensor(features_rows, device=self.device))
        labels = distributed.shard(torch.as_tensor(label_codes, device=self.device))
        # Rounded down to what the Poisson mask realises exactly: the ledger charges this rate.
        nominal_rate = min(cfg.max_sample_rate, cfg.batch_size / self.released_rows)
        sample_rate = exact_sample_rate(nominal_rate)
        expected_batch = max(1, round(sample_rate * self.released_rows))
        self.generator = self._build_generator()
        with self._tilts_lock:
            self._tilts.clear()  # fitted to the weights they were fitted on
        discriminator = Discriminator.for_table(self.model_config, self.transformer)
        discriminator = discriminator.to(self.device)
        g_opt, d_opt = adam_optimizers(self.generator, discriminator, cfg)
        first_step, history = 1, []
        if resume_from is not None:
            meta, tensors = resume_from
            with checkpoint.must_fit():
                self.generator.load_state_dict(tensors["generator"])
                discriminator.load_state_dict(tensors["discriminator"])
                g_opt.load_state_dict(tensors["generator_optimizer"])
                d_opt.load_state_dict(tensors["discriminator_optimizer"])
                torch.set_rng_state(tensors["rng"])
            first_step, history = int(meta["step"]) + 1, list(meta["history"])
        distributed.align(self.generator, discriminator)  # every rank starts from rank 0's
        if distributed.rank() > 0:  # ... but draws its own fakes for G's steps (public stream)
            stream = np.random.SeedSequence([self.seed, distributed.rank()]).generate_state(1)
            torch.manual_seed(int(stream[0]))
        critic, d_steps = self._make_critic(
            discriminator, d_opt, sample_rate, expected_batch, secret, first_step
        )
        if isinstance(critic, PlainSGD):  # no ledger to count down: skip the steps already done
            d_steps = max(0, d_steps - (first_step - 1))
        if resume_from is not None and resume_from[0]["finished"]:
            d_steps = 0
        label_probs = torch.as_tensor(self.label_probs, dtype=torch.float32, device=self.device)
        if self.ledger is not None:
            # The releases before training are on record; from here the checkpointer writes
            # privacy.json, paid ahead per block of steps, and nothing may overwrite it.
            self.ledger.on_record = None
        trainer = CGANTrainer(
            self.generator,
            critic,
            g_opt,
            features,
            labels,
            label_probs,
            secret,
            sample_rate,
            expected_batch,
            self.model_config.auxiliary_weight,
            self.marginals,
            self.model_config.marginal_weight,
            self.model_config.marginal_rows,
            cfg.bf16_generator_step,
            cfg.generator_ema,
        )
        if resume_from is not None and trainer.generator_average is not None:
            with checkpoint.must_fit():
                trainer.generator_average.load_state_dict(resume_from[1]["generator_average"])
        saver = None
        if checkpoint_dir is not None:
            saver = Checkpointer(self, trainer, discriminator, d_opt, Path(checkpoint_dir))
        assert self.ledger is not None
        last = first_step + d_steps - 1
        history = run_steps(trainer, self.ledger, cfg, first_step, last, saver, history)
        trainer.finish()
        if distributed.rank() == 0:
            self.ledger.on_record = lambda: self._ledger_to_disk(checkpoint_dir)
            try:
                if self._measure_where_g_is_wrong(features_rows, secret.numpy) and saver:
                    saver.save(last, history, finished=True)  # a resume keeps the pairs
            finally:
                self.ledger.on_record = None
        self._share_releases()
        self.metrics = {
            "epochs": history,
            "discriminator_steps": first_step + d_steps - 1,
            "sample_rate": sample_rate,
            "expected_batch_size": expected_batch,
            "processes": distributed.world_size(),
            # What the settings came to on this device and run: bfloat16 only where native,
            # and an average only over G steps actually taken (else the last iterate).
            "generator_step_dtype": "bfloat16" if trainer.bf16_generator_step else "float32",
            "generator_average_steps": trainer.averaged_steps(),
        }
        return self

    def _build_generator(self) -> Generator:
        assert self.transformer is not None
        return Generator.for_table(self.model_config, self.transformer).to(self.device)

    def _make_critic(
        self,
        discriminator: Discriminator,
        d_opt: torch.optim.Optimizer,
        sample_rate: float,
        expected_batch: int,
        secret: SecretRandomness,
        first_step: int = 1,
    ) -> tuple[DPSGD | PlainSGD, int]:
        """Wrap D for DP-SGD and decide how many discriminator steps are left to take."""
        assert self.ledger is not None
        cfg, privacy = self.train_config, self.privacy
        planned = cfg.steps or max(1, _capped(_steps_for(cfg.epochs, sample_rate), cfg.max_steps))
        if not self.ledger.private:
            return PlainSGD(discriminator, d_opt, expected_batch), planned
        if first_step > 1:  # resumed: the DP-SGD release is already open
            release = self.ledger.releases[-1]
            if release.sample_rate != sample_rate:  # the mask must realise the charged rate
                raise UserInputError("the checkpoint's sampling rate does not match its ledger")
        else:
            release = self._open_dp_sgd(planned, sample_rate, expected_batch)
        steps = max(0, self.ledger.steps_left(release))
        if steps == 0 and first_step == 1:
            raise UserInputError(
                f"epsilon={self.epsilon} is spent before the first discriminator step "
                "(raise epsilon or privacy.noise_multiplier)"
            )
        critic = DPSGD(
            discriminator,
            d_opt,
            ledger=self.ledger,
            release=release,
            max_grad_norm=privacy.max_grad_norm,
            expected_batch_size=expected_batch,
            secret=secret,
        )
        return critic, steps

    def _open_dp_sgd(self, planned: int, sample_rate: float, expected_batch: int) -> Release:
        """Fix sigma (calibrated, or given) and the step limit the budget allows."""
        assert self.ledger is not None
        cfg, privacy = self.train_config, self.privacy
        if privacy.noise_multiplier is None:
            sigma = self.ledger.calibrate(sample_rate, planned, self.ledger.gaussian_budget())
            cap = planned
        else:
            sigma = float(privacy.noise_multiplier)
            by_epochs = 10**9 if cfg.max_epochs is None else _steps_for(cfg.max_epochs, sample_rate)
            cap = _capped(by_epochs, cfg.max_steps)
        return self.ledger.open_dp_sgd(
            "dp_sgd_discriminator",
            sigma,
            sample_rate,
            cap,
            max_grad_norm=privacy.max_grad_norm,
            expected_batch_size=expected_batch,
        )

    # --------------------------------------------------------------- sample
    def sample(
        self, n: int | None = None, label: Any = None, seed: int | None = None
    ) -> pd.DataFrame:
        """Draw ``n`` synthetic rows (default: the released size of the training table).

        ``label`` fixes the condition to one class; otherwise labels follow the released
        (noisy) label frequencies.
        """
        parts = self._sample_parts(n, label, seed)
        assert self.transformer is not None  # (checked by _sample_parts)
        return self.transformer.decode_parts(*parts)

    def sample_arrow(
        self, n: int | None = None, label: Any = None, seed: int | None = None
    ) -> pa.Table:
        """:meth:`sample`'s rows as an Arrow table (what files of millions of rows are written
        from, without a Python object per string)."""
        parts = self._sample_parts(n, label, seed)
        assert self.transformer is not None  # (checked by _sample_parts)
        return self.transformer.decode_arrow(*parts)

    def _sample_parts(
        self, n: int | None, label: Any, seed: int | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(within-bin positions, codes, label codes) of ``n`` sampled rows."""
        if self.generator is None or self.transformer is None or self.label_probs is None:
            raise RuntimeError("fit or load the model before sampling")
        if n is None:
            # The released (noisy) total: the output size does not reveal the exact row count.
            n = self.released_rows
        if not isinstance(n, (int, np.integer)) or n <= 0:
            raise UserInputError(
                f"the number of rows to sample must be a positive integer, got {n}"
            )
        probs = torch.as_tensor(self.label_probs, dtype=torch.float32)
        if label is not None:
            levels = list(self.transformer.label_column.levels)
            code = self.transformer.label_column.encode(pd.Series([label]))[0]
            if code >= len(levels):
                raise UserInputError(
                    f"label {label!r} is not a class of {self.transformer.target!r}"
                )
            probs = F.one_hot(torch.tensor(int(code)), len(levels)).float()
        self.generator.eval()
        # A random stream of this call's own: the same seed gives the same table, sampling
        # does not disturb the caller's random state, and calls may run in parallel threads.
        rng = torch.Generator(self.device).manual_seed(self.seed if seed is None else seed)
        pool = self.raking_pool()
        key = torch.randint(2**62, (1,), generator=rng, device=self.device)
        numpy_rng = np.random.default_rng(int(key))  # raking's draws, from the same seed
        only = None if label is None else int(code)
        probs = probs.to(self.device)
        raker = None
        if pool > 1:
            assert self.marginals is not None
            raker = postprocess.Raker(self.marginals, self.label_probs, only)
        parts = []
        # In blocks of output rows, so that memory does not grow with n or the pool.
        block = RAKING_ROWS // pool
        for start in range(0, n, block):
            size = min(block, n - start)
            # ``pool`` generated rows per row kept; raking picks the rows to keep.
            candidates = torch.multinomial(probs, size * pool, True, generator=rng)
            blocks = self._generate(candidates, rng)
            labels = candidates.cpu().numpy()
            if raker is not None:
                keep = raker(blocks, labels, size, numpy_rng)
                blocks, labels = blocks[keep], labels[keep]
            parts.append((blocks, labels))
        blocks, labels = (np.concatenate(part) for part in zip(*parts, strict=True))
        # Each wide column's position within its bin: a uniform quantile of its released
        # density there (public randomness, from the same seed).
        positions = numpy_rng.uniform(-1.0, 1.0, (n, len(self.transformer.wide_columns)))
        return positions, blocks, labels

    def raking_pool(self) -> int:
        """Generated rows per sampled row: ``model.sample_pool``, or (null) ``RAKING_POOL``
        where the released marginals are precise enough to match, else 1 (no raking)."""
        if self.marginals is None:
            return 1
        if self.model_config.sample_pool is not None:
            return self.model_config.sample_pool
        return RAKING_POOL if self._marginals_within(RAKING_NOISE_LIMIT) else 1

    def tilting(self) -> bool:
        """Whether sampling is tilted: ``model.tilt_sampling``, or (null) where the released
        marginals are precise enough (:data:`TILT_NOISE_LIMIT`)."""
        if self.marginals is None:
            return False
        if self.model_config.tilt_sampling is not None:
            return self.model_config.tilt_sampling
        return self._marginals_within(TILT_NOISE_LIMIT)

    def _marginals_within(self, limit: float) -> bool:
        """Whether the noise std on one released count is at most ``limit`` of the released
        row count: the public test of precision that the null settings apply."""
        return self.marginal_noise() <= limit * self.released_rows

    def marginal_noise(self) -> float:
        """The noise std on one released count of the marginals: public, from the ledger."""
        if self.ledger is None:
            return self.recorded_marginal_noise
        return measure.marginal_noise(self.ledger)

    def _generate(self, labels: torch.Tensor, rng: torch.Generator) -> np.ndarray:
        """The codes of one generated row per label, each class's rows in passes of their own
        (with the class's tilt)."""
        generator = self.generator
        assert generator is not None and self.label_probs is not None
        tilts = self._class_tilts()
        blocks = len(generator.block_order)
        codes = torch.empty(len(labels), blocks, dtype=torch.long, device=self.device)
        with torch.no_grad(), self._products():
            for label in labels.unique().tolist():
                y = F.one_hot(torch.tensor(label), len(self.label_probs)).float().to(self.device)
                tilt = None if tilts is None else tilts[label]
                for rows in (labels == label).nonzero().squeeze(1).split(SAMPLE_CHUNK):
                    z = torch.randn(
                        len(rows), generator.latent_dim, generator=rng, device=self.device
                    )
                    codes[rows] = generator.sample_parts(z, y.expand(len(rows), -1), rng, tilt)
        return codes.cpu().numpy()

    def _bf16_products(self) -> bool:
        """Whether sampling's matrix products run in bfloat16: where asked for and native."""
        return bool(self.model_config.bf16_sampling and native_bf16(self.device))

    def _products(self) -> Any:
        """The precision context of sampling's matrix products (:meth:`_bf16_products`)."""
        bf16 = self._bf16_products()
        return torch.autocast(self.device.type, torch.bfloat16) if bf16 else nullcontext()

    def _class_tilts(self) -> list[list[torch.Tensor]] | None:
        """Sampling's tilt per class (:func:`rdpgan.postprocess.class_tilts`), or None without
        released marginals or where :meth:`tilting` says no; fitted once per precision."""
        if not self.tilting():
            return None
        assert self.generator is not None and self.marginals is not None
        bf16 = self._bf16_products()
        with self._tilts_lock:
            if bf16 not in self._tilts:
                state = np.random.SeedSequence([self.seed, TILT_STREAM]).generate_state(1)
                rng = torch.Generator(self.device).manual_seed(int(state[0]))
                self.generator.eval()
                # The noise of one cell of a class's released distribution, in probability
                # units: public. marginal_noise() is the larger of the marginal releases'
                # (with pairs released, the pairs' on Adult, 1.4 times the per-class tables'
                # own at ε=8), so the tilt shrinks toward G a little more than the per-class
                # noise alone asks; rounds 19-20 ran with it.
                counts = np.maximum(self.label_probs * self.released_rows, 1.0)
                variance = (self.marginal_noise() / counts) ** 2
                with self._products():
                    self._tilts[bf16] = postprocess.class_tilts(
                        self.generator, self.marginals, list(variance), TILT_ROWS, rng
                    )
            return self._tilts[bf16]

    # ---------------------------------------------------------- save / load
    def save(self, directory: str | Path) -> Path:
        """Write ``model.pt`` (generator weights only), ``model.json`` and ``privacy.json``.

        Weights load with ``torch.load(weights_only=True)`` and metadata is plain JSON, so
        loading a model never executes code from the file.
        """
        if self.generator is None or self.transformer is None or self.ledger is None:
            raise RuntimeError("fit the model before saving it")
        directory = Path(directory)
        state = {k: v.detach().cpu() for k, v in self.generator.state_dict().items()}
        atomic_write(directory / "model.pt", lambda tmp: torch.save(state, tmp))
        write_json(directory / "model.json", self.describe())
        write_json(directory / LEDGER_FILE, self.ledger.to_dict())
        return directory

    def describe(self) -> dict[str, Any]:
        """Everything needed to rebuild the generator, as JSON (no pickles)."""
        assert self.transformer is not None and self.label_probs is not None
        return {
            "format": MODEL_FORMAT,
            "target": self.transformer.target,
            "positive_label": self.positive_label,
            "schema": self.transformer.schema.to_specs(),
            "label_probs": [float(p) for p in self.label_probs],
            # Released (DP) like label_probs: sampling is tilted (and raked) toward them.
            "marginals": None if self.marginals is None else self.marginals.to_dict(),
            # Released (DP): the wide numeric columns' bins and positions within them.
            "densities": self.transformer.densities,
            "adaptive_drawn": self.adaptive_drawn,
            "marginal_noise": self.marginal_noise(),  # (public: from the ledger)
            "released_rows": self.released_rows,
            "epsilon": self.epsilon,
            "delta": self.delta,
            # Read by every tool that uses this model (sample, report): a model whose ledger
            # is not end-to-end private says so wherever it goes.
            "end_to_end_private": bool(self.ledger and self.ledger.end_to_end),
            "privacy_notes": list(self.ledger.notes) if self.ledger else self.privacy_notes,
            "seed": self.seed,
            "privacy": public_privacy_settings(self.privacy),
            "model": asdict(self.model_config),
            "train": asdict(self.train_config),
        }

    @classmethod
    def _from_description(cls, meta: dict[str, Any], device: str) -> DPCGAN:
        """A model with everything but weights rebuilt from :meth:`describe`'s JSON."""
        if meta.get("format") != MODEL_FORMAT:
            raise UserInputError("the saved model has an unknown format version")
        model = cls(
            epsilon=meta["epsilon"],
            delta=meta["delta"],
            privacy=PrivacyConfig(**meta["privacy"]),
            model=ModelConfig(**{**RECORDED_BEFORE_TILT, **meta["model"]}),
            train=TrainConfig(**with_absent_train_settings(meta["train"])),
            seed=meta["seed"],
            device=device,
        )
        model.densities = {str(k): list(v) for k, v in meta["densities"].items()}
        model.adaptive_drawn = bool(meta["adaptive_drawn"])
        model.transformer = TableTransformer(
            Schema.from_specs(meta["schema"]),
            meta["target"],
            model.model_config.numeric_bins,
            model.densities,
        )
        model.positive_label = meta["positive_label"]
        model.privacy_notes = list(meta.get("privacy_notes", []))
        model.label_probs = np.asarray(meta["label_probs"], dtype=float)
        marginals = meta["marginals"]
        model.marginals = None if marginals is None else measure.Marginals.from_dict(marginals)
        model.released_rows = int(meta["released_rows"])
        # Models saved before it name their sample_pool; unknown noise is not raked toward.
        model.recorded_marginal_noise = float(meta.get("marginal_noise", math.inf))
        return model

    @classmethod
    def load(cls, directory: str | Path, device: str = "auto") -> DPCGAN:
        directory = Path(directory)
        try:
            model = cls._from_description(read_json(directory / "model.json"), device)
            model.generator = model._build_generator()
            with warnings.catch_warnings():  # torch warns in several lines about bad archives
                warnings.simplefilter("ignore")
                state = torch.load(directory / "model.pt", map_location="cpu", weights_only=True)
            model.generator.load_state_dict(state)
        except FileNotFoundError as exc:
            raise UserInputError(
                f"no saved model in {directory}: {Path(exc.filename).name} is missing"
            ) from exc
        except UserInputError:
            raise
        except (
            KeyError,
            TypeError,
            ValueError,
            RuntimeError,
            EOFError,
            AttributeError,
            OSError,
            pickle.UnpicklingError,
        ) as exc:
            raise UserInputError(f"the model in {directory} is damaged or incompatible") from exc
        return model


def _conformed(df: pd.DataFrame, target: str, schema: Schema) -> pd.DataFrame:
    """The private rows checked against the schema. Nothing here counts the rows or their
    classes (δ is checked against released values)."""
    frame = schema.conform(df)
    check_target(frame, schema, target)
    return frame


def _capped(steps: int, cap: int | None) -> int:
    return steps if cap is None else min(steps, cap)


def _steps_for(epochs: float, sample_rate: float) -> int:
    """Steps in ``epochs`` passes at ``sample_rate``, rounded first: the exact rate sits a hair
    below the nominal one (1/q of 0.1 must be 10 steps, not 11)."""
    return math.ceil(round(epochs / sample_rate, 6))
