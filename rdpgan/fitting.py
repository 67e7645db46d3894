"""Fitting a model: measure, then train, then measure where the generator is wrong.

``fit`` spends the privacy budget in up to five releases, all composed in one ledger:
1. the label histogram (:func:`rdpgan.measure.label_counts`), which the generator samples
   labels from (its noisy total also stands in for the row count wherever one is needed,
   and with the budget plans how finely numeric columns are coded: :mod:`rdpgan.resolution`);
2. the densities of the wide numeric columns (:func:`rdpgan.measure.numeric_densities`),
   which cut their bins at equal released mass and place each sampled number within its bin;
3. with ``model.marginal_weight > 0``, the marginals (:func:`rdpgan.measure.release_marginals`:
   each feature's code distribution per class, a private choice of column pairs and their
   joint tables), which the generator's marginal loss matches and sampling is tilted toward
   where they are precise, and raked toward with ``model.sample_pool`` > 1
   (:mod:`rdpgan.postprocess`);
4. DP-SGD on the discriminator (Poisson sampling, per-sample clipping, Gaussian noise,
   :mod:`rdpgan.critic`);
5. after training, pairs chosen where the sampler is furthest from the rows
   (:mod:`rdpgan.adaptive`), reserved in the ledger before DP-SGD; where sampling would not
   rake toward them, their share goes to the marginals (3.) instead.
The generator only ever sees the discriminator's outputs and these releases, so it and every
sample drawn from it are private by post-processing.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from rdpgan import adaptive, checkpoint, distributed, measure, resolution, sampler
from rdpgan.checkpoint import Checkpointer
from rdpgan.config import DatasetConfig, SchemaConfig, TrainConfig
from rdpgan.critic import make_critic
from rdpgan.data.datasets import frame_cells
from rdpgan.data.loading import conditioned, conform_rows, declared_condition, resolve_schema
from rdpgan.data.schema import Schema
from rdpgan.data.target import check_target
from rdpgan.errors import UserInputError
from rdpgan.fitted import FittedModel
from rdpgan.io import read_json, write_json
from rdpgan.models import Discriminator, Generator
from rdpgan.privacy.budget import LEDGER_FILE, NON_PRIVATE, validate_budget
from rdpgan.privacy.dp_sgd import PlainSGD
from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.privacy.private_schema import SchemaBudget, SchemaRelease
from rdpgan.privacy.randomness import (
    FIT_STREAM,
    RANK_STREAM,
    SCHEMA_STREAM,
    SecretRandomness,
    exact_sample_rate,
)
from rdpgan.settings import validate_settings
from rdpgan.threads import thread_policy
from rdpgan.training import CGANTrainer, adam_optimizers, load_optimizer_state, run_steps
from rdpgan.transform import TableTransformer

# What a training checkpoint must hold (see rdpgan.checkpoint.Checkpointer.save).
CHECKPOINT_META = ("model", "ledger", "history", "finished", "step")
CHECKPOINT_TENSORS = (
    "generator",
    "discriminator",
    "generator_optimizer",
    "discriminator_optimizer",
    "rng",
)


def fit(
    model: FittedModel,
    df: pd.DataFrame,
    target: str,
    release: SchemaRelease,
    positive_label: Any,
    checkpoint_dir: str | Path | None,
) -> None:
    """Train ``model`` on ``df`` (the private rows); domains come from ``release`` alone."""
    model.device  # noqa: B018 (an unknown or absent device fails before anything is spent)
    if release.releases and not release.reused and distributed.world_size() > 1:
        raise UserInputError(
            "a paid schema is released in one process: release it first (python -m "
            "rdpgan.schema), then declare it (schema.file=<run>/schema.yaml): its cost comes along"
        )
    checkpoint_dir = checkpoint_dir if distributed.rank() == 0 else None  # one writer
    charge_schema(model, release, checkpoint_dir)
    assert model.ledger is not None
    # Each later release reaches the file as soon as it is recorded, before its noise.
    model.ledger.on_record = lambda: _ledger_to_disk(model, checkpoint_dir)
    schema = release.schema
    frame = _conformed(df, target, schema)
    # Equal-width bins, from the schema alone.
    public = TableTransformer(schema, target, model.model_config.numeric_bins)
    labels = public.encode_labels(frame)
    if distributed.world_size() > 1:  # one table, sharded (one process: nothing to compare)
        distributed.refuse_unless_same(public.encode(frame), labels)
    model.positive_label = positive_label
    torch.manual_seed(model.seed)  # public randomness only: initialisation, G's own draws
    secret = _secret(model, first_step=1)
    if distributed.rank() == 0:  # under torchrun, rank 0 releases and the others receive
        _release_label_counts(model, labels, public.n_classes, secret.numpy)
        model.resolution = resolution.planned_resolution(model, public.features, public.n_classes)
        bins, grid_limit = model.resolution
        # The columns cut into bins at the planned resolution: those the densities measure.
        public = TableTransformer(schema, target, bins, grid_limit=grid_limit)
        positions = public.positions(frame)
        model.densities = _release_densities(model, positions, public.wide_columns, secret.numpy)
    _share_releases(model)
    if distributed.world_size() > 1:  # (one process checked right after the label counts)
        _check_row_count(model)
    bins, grid_limit = model.resolution
    model.transformer = TableTransformer(schema, target, bins, model.densities, grid_limit)
    features = model.transformer.encode(frame)
    if distributed.rank() == 0:
        _release_marginals(model, features, labels, secret.numpy)
    _share_releases(model)
    model.marginal_noise = measure.marginal_noise(model.ledger)
    _train(model, features, labels, checkpoint_dir, secret)


def _release_label_counts(
    model: FittedModel, labels: np.ndarray, n_classes: int, noise: np.random.Generator
) -> None:
    """The label histogram, released and recorded; its noisy total stands in for the row
    count everywhere after (δ's check first, so that a refused run spends less)."""
    assert model.ledger is not None
    released = measure.label_counts(
        labels, n_classes, model.ledger, model.privacy.label_noise_multiplier, noise
    )
    model.released_rows = max(1, round(float(released.sum())))
    if distributed.world_size() == 1:  # (under torchrun, every rank checks after sharing)
        _check_row_count(model)
    model.label_probs = np.clip(released, 1.0, None) / np.clip(released, 1.0, None).sum()


def _release_densities(
    model: FittedModel, positions: list[np.ndarray], names: list[str], noise: np.random.Generator
) -> dict[str, list[float]]:
    """The wide numeric columns' densities, released and recorded (none without a wide
    column, with ``privacy.numeric_density_fraction`` 0, or where the accountant cannot
    certify so small a share: all public facts)."""
    assert model.ledger is not None
    epsilon = resolution.density_epsilon(model)
    if not positions or epsilon <= 0 or not measure.affordable(model.ledger, epsilon):
        return {}
    densities = measure.numeric_densities(positions, model.ledger, epsilon, noise)
    return {name: d.tolist() for name, d in zip(names, densities, strict=True)}


def _release_marginals(
    model: FittedModel, features: np.ndarray, labels: np.ndarray, noise: np.random.Generator
) -> None:
    """The marginals G matches (with ``model.marginal_weight`` > 0), released and recorded,
    and the pairs measured after training reserved (:func:`rdpgan.adaptive.reserve`), or,
    where sampling would not rake, their share given to the marginals."""
    assert model.transformer is not None and model.ledger is not None
    assert model.label_probs is not None
    if model.model_config.marginal_weight > 0 and model.transformer.code_sizes:
        fraction = adaptive.marginals_fraction(model, model.transformer.features)
        model.marginals = measure.release_marginals(
            features,
            labels,
            model.transformer,
            model.label_probs,
            model.released_rows,
            model.ledger,
            fraction,
            model.privacy.selection_fraction,
            noise,
            configured=model.privacy.marginals_fraction,
            noise_limit=sampler.TILT_NOISE_LIMIT,
        )
        model.marginal_noise = measure.marginal_noise(model.ledger)
        if fraction == model.privacy.marginals_fraction:  # (not moved: the pairs keep theirs)
            adaptive.reserve(model)


def _share_releases(model: FittedModel) -> None:
    """Under torchrun: rank 0's released values and ledger on every rank (costs and noisy
    statistics only, which are safe to send), so that all ranks plan the same training."""
    if distributed.world_size() == 1:
        return
    assert model.ledger is not None
    shared = (
        model.label_probs,
        model.released_rows,
        model.resolution,
        model.densities,
        model.marginals,
        model.ledger.to_dict(),
    )
    (
        model.label_probs,
        model.released_rows,
        model.resolution,
        model.densities,
        model.marginals,
        ledger,
    ) = distributed.from_rank_zero(shared)
    if distributed.rank() != 0:
        model.ledger = PrivacyLedger.from_dict(ledger)


def _secret(model: FittedModel, first_step: int) -> SecretRandomness:
    """The run's secret randomness (OS entropy unless ``privacy.noise_seed``); a resumed
    seeded run keys it with its first step, so it does not replay noise already used."""
    rank = distributed.rank()
    ranks = (RANK_STREAM, rank) if rank > 0 else ()  # rank 0 draws as one process would
    return SecretRandomness(model.privacy.noise_seed, FIT_STREAM, first_step, *ranks)


def release_frame_schema(
    model: FittedModel,
    df: pd.DataFrame,
    target: str | None,
    positive_label: Any,
    directory: str | Path | None,
) -> tuple[pd.DataFrame, SchemaRelease]:
    """(rows, schema) of a DataFrame given no schema: its cells read as text one by one, as a
    CSV's are, and a private schema released from them with the run's secret randomness (OS
    entropy unless ``privacy.noise_seed``), its cost in the ledger before its noise. Without a
    ``target``, the schema chooses the column to condition on (``release.target``)."""
    if distributed.launched():  # each process would draw a schema of its own
        raise UserInputError(
            "a schema is released in one process: release it without torchrun, then pass it "
            "to fit (schema=<its schema.yaml>)"
        )
    dataset = DatasetConfig(name="dataframe", target=target, positive_label=positive_label)
    if target is not None and target not in df.columns:
        raise UserInputError(f"target column {target!r} is not in the data")
    config = SchemaConfig(source="private")
    cells = frame_cells(df)
    budget = SchemaBudget(model.epsilon, model.delta, model.privacy.accountant)
    rng = SecretRandomness(model.privacy.noise_seed, SCHEMA_STREAM).numpy

    def pay(costs: list[Release]) -> None:
        charge_schema(model, SchemaRelease.cost(costs), directory)

    release = resolve_schema(cells, dataset, config, budget, rng, pay=pay)
    return conform_rows(cells, release, conditioned(dataset, release), config), release


def declared_target(schema: SchemaRelease, positive_label: Any) -> tuple[str, Any]:
    """(target, positive class) a fit given a schema but no target conditions on
    (:func:`~rdpgan.data.loading.declared_condition`; the user's positive class wins)."""
    dataset = declared_condition(DatasetConfig(name="dataframe"), schema)
    assert dataset.target is not None
    return dataset.target, positive_label if positive_label is not None else dataset.positive_label


# A reused schema released under another accountant: this run's order was not fixed before it.
ORDER_NOTE = (
    "the reused schema was released under the {accountant} accountant: this run's Rényi order "
    "was fixed after that release, from its own target (reuse it under the same accountant)"
)


def charge_schema(model: FittedModel, release: SchemaRelease, directory: str | Path | None) -> None:
    """Open the run's ledger with what the schema cost (its releases and opt-outs), and write
    it: a fit starts here (a paid schema is recorded before anything can fail), and so does a
    run refused after its schema drew noise."""
    ledger = PrivacyLedger(model.epsilon, model.delta, model.privacy.accountant)
    if release.reused and release.order is not None and ledger.order is not None:
        if release.accountant == ledger.accountant:
            ledger.order = release.order  # fixed before the schema's release, not after it
        else:
            ledger.warn(ORDER_NOTE.format(accountant=release.accountant))
    if model.privacy.noise_seed is not None:
        ledger.use_seeded_noise()
    for note in release.notes:
        ledger.warn(note)
    for paid in release.releases:
        if ledger.private:
            ledger.record(paid)
    model.ledger = ledger
    _ledger_to_disk(model, directory)


def _ledger_to_disk(model: FittedModel, directory: str | Path | None) -> None:
    """Releases made so far go into the run's ledger file at once: a later failure (say,
    DP-SGD calibration) must not leave noise drawn from the data unrecorded. A ledger with
    nothing spent is not written, so bad input found before any release leaves no file."""
    ledger = model.ledger
    if directory is not None and ledger is not None and ledger.private and ledger.releases:
        write_json(Path(directory) / LEDGER_FILE, ledger.to_dict())


def _check_row_count(model: FittedModel) -> None:
    """δ must stay below 1/n, checked against the released (noisy) row count: whether a
    run refuses is then decided from a release, like everything after it, and not from
    the exact number of rows (at n ≈ 1/δ, one row would tell a refusal from a run)."""
    if model.privacy.accountant == NON_PRIVATE:
        return
    try:
        validate_budget(model.epsilon, model.delta, n_rows=model.released_rows)
    except UserInputError as exc:
        # A power of ten ten times below 1/n of the released count (post-processing): a big
        # table's users are told what to pass instead, not left to guess n.
        suits = 10.0 ** math.floor(math.log10(0.1 / max(model.released_rows, 1.0)))
        raise UserInputError(
            f"{exc}; judged from the released label counts, which are spent (privacy.json); "
            f"delta={suits:.0e} or less suits them"
        ) from exc


def resume(
    model_type: type[FittedModel],
    directory: str | Path,
    df: pd.DataFrame,
    device: str,
    noise_seed: int | None,
) -> Any:
    """Continue the run checkpointed in ``directory`` (see ``DPCGAN.resume``)."""
    if distributed.world_size() > 1:
        raise UserInputError("a run is resumed in one process: resume it without torchrun")
    meta, tensors = checkpoint.load(directory, CHECKPOINT_META, CHECKPOINT_TENSORS)
    # The write-ahead ledger, not the checkpoint's copy: it may hold steps taken after it.
    ledger_path = Path(directory) / LEDGER_FILE
    if not ledger_path.is_file():
        raise UserInputError(f"{ledger_path} is missing; the privacy spent is unknown")
    try:
        model = model_type.from_description(meta["model"], device)
        model.privacy.noise_seed = noise_seed
        validate_settings(model.privacy, model.model_config, model.train_config)
        model.ledger = PrivacyLedger.from_dict(read_json(ledger_path))
        _refuse_older_ledger(model.ledger, PrivacyLedger.from_dict(meta["ledger"]), directory)
        if noise_seed is not None:
            model.ledger.use_seeded_noise()
        model.marginal_noise = measure.marginal_noise(model.ledger)
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
    secret = _secret(model, int(meta["step"]) + 1)
    _train(model, features, labels, directory, secret, resume_from=(meta, tensors))
    return model


def _refuse_older_ledger(
    ledger: PrivacyLedger, checkpointed: PrivacyLedger, directory: str | Path
) -> None:
    """The write-ahead ledger charges at least every step the checkpoint holds, release by
    release: one that charges fewer (restored from an older copy?) would resume below the
    privacy spent."""
    charged = {r.name: r.steps for r in ledger.releases}
    for release in checkpointed.releases:
        if charged.get(release.name, -1) < release.steps:
            raise UserInputError(
                f"{directory}'s privacy.json charges fewer {release.name} steps than its "
                "checkpoint holds (restored from an older copy?); restore the newer one"
            )


def checkpoint_schema(directory: str | Path) -> Schema:
    """The schema the checkpointed run in ``directory`` encodes its rows with."""
    meta, _ = checkpoint.load(directory, CHECKPOINT_META, CHECKPOINT_TENSORS)
    try:
        return Schema.from_specs(meta["model"]["schema"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UserInputError(f"the run in {directory} has a damaged checkpoint.json") from exc


def _under_thread_policy(train: Callable[..., None]) -> Callable[..., None]:
    """``train(model, ...)`` under the model's thread policy (:func:`thread_policy`): the
    API's fit and resume train as the command does."""

    @functools.wraps(train)
    def wrapped(model: FittedModel, *args: Any, **kwargs: Any) -> None:
        with thread_policy(model.train_config.threads):
            train(model, *args, **kwargs)

    return wrapped


@_under_thread_policy
def _train(
    model: FittedModel,
    features_rows: np.ndarray,
    label_codes: np.ndarray,
    checkpoint_dir: str | Path | None,
    secret: SecretRandomness,
    resume_from: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> None:
    assert model.transformer is not None and model.label_probs is not None
    assert model.ledger is not None
    cfg, ledger = model.train_config, model.ledger
    # Under torchrun each rank trains on every world_size-th row (all of them otherwise).
    features = distributed.shard(torch.as_tensor(features_rows, device=model.device))
    labels = distributed.shard(torch.as_tensor(label_codes, device=model.device))
    # Rounded down to what the Poisson mask realises exactly: the ledger charges this rate.
    nominal_rate = min(cfg.max_sample_rate, cfg.batch_size / model.released_rows)
    sample_rate = exact_sample_rate(nominal_rate)
    expected_batch = max(1, round(sample_rate * model.released_rows))
    generator = _new_generator(model)
    discriminator = Discriminator.for_table(model.model_config, model.transformer)
    discriminator = discriminator.to(model.device)
    g_opt, d_opt = adam_optimizers(generator, discriminator, cfg)
    first_step, history = 1, []
    if resume_from is not None:
        meta, tensors = resume_from
        with checkpoint.must_fit():
            generator.load_state_dict(tensors["generator"])
            discriminator.load_state_dict(tensors["discriminator"])
            load_optimizer_state(g_opt, tensors["generator_optimizer"])
            load_optimizer_state(d_opt, tensors["discriminator_optimizer"])
            torch.set_rng_state(tensors["rng"])
        first_step, history = int(meta["step"]) + 1, list(meta["history"])
    distributed.align(generator, discriminator)  # every rank starts from rank 0's
    if distributed.rank() > 0:  # ... but draws its own fakes for G's steps (public stream)
        stream = np.random.SeedSequence([model.seed, distributed.rank()]).generate_state(1)
        torch.manual_seed(int(stream[0]))
    # Copied before make_critic hooks the clipper to D's layers, and without a draw from the public
    # stream (a resumed run continues it where the checkpoint left it).
    snapshot = copy.deepcopy(discriminator) if simultaneous_steps(cfg, expected_batch) else None
    critic, d_steps = make_critic(
        discriminator,
        d_opt,
        ledger,
        model.privacy,
        cfg,
        sample_rate,
        expected_batch,
        secret,
        first_step,
    )
    if isinstance(critic, PlainSGD):  # no ledger to count down: skip the steps already done
        d_steps = max(0, d_steps - (first_step - 1))
    if resume_from is not None and resume_from[0]["finished"]:
        d_steps = 0
    label_probs = torch.as_tensor(model.label_probs, dtype=torch.float32, device=model.device)
    # The releases before training are on record; from here the checkpointer writes
    # privacy.json, paid ahead per block of steps, and nothing may overwrite it.
    ledger.on_record = None
    trainer = CGANTrainer(
        generator,
        critic,
        g_opt,
        features,
        labels,
        label_probs,
        secret,
        sample_rate,
        expected_batch,
        model.model_config.auxiliary_weight,
        model.marginals,
        model.model_config.marginal_weight,
        model.model_config.marginal_rows,
        cfg.bf16_generator_step,
        cfg.generator_ema,
        snapshot,
        cfg.generator_batch,
    )
    if resume_from is not None and trainer.generator_average is not None:
        with checkpoint.must_fit():
            trainer.generator_average.load_state_dict(resume_from[1]["generator_average"])
    saver = None
    if checkpoint_dir is not None:

        def tensors() -> dict[str, Any]:
            state = {
                "generator": generator.state_dict(),
                "discriminator": discriminator.state_dict(),
                "generator_optimizer": g_opt.state_dict(),
                "discriminator_optimizer": d_opt.state_dict(),
                "rng": torch.get_rng_state(),
            }
            if trainer.generator_average is not None:
                state["generator_average"] = trainer.generator_average.state_dict()
            return state

        saver = Checkpointer(Path(checkpoint_dir), cfg, ledger, tensors, model.describe)
    last = first_step + d_steps - 1
    try:
        history = run_steps(trainer, ledger, cfg, first_step, last, saver, history)
    except BaseException:
        if saver is not None:  # (first: nothing of the trainer's can then keep it open)
            saver.close(quiet=True)  # (the step's own error is the one to report)
        trainer.close()
        raise
    trainer.close()
    if saver is not None:
        saver.close()  # the last save is on disk before anything else is released
    trainer.finish()
    if distributed.rank() == 0:
        ledger.on_record = lambda: _ledger_to_disk(model, checkpoint_dir)
        try:
            if adaptive.measure_where_wrong(model, features_rows, secret.numpy) and saver:
                saver.save(last, history, finished=True)  # a resume keeps the pairs
        finally:
            ledger.on_record = None
    _share_releases(model)
    model.metrics = {
        "epochs": history,
        "discriminator_steps": first_step + d_steps - 1,
        "sample_rate": sample_rate,
        "expected_batch_size": expected_batch,
        "processes": distributed.world_size(),
        # What the settings came to on this device and run: bfloat16 only where native,
        # and an average only over G steps actually taken (else the last iterate).
        "generator_step_dtype": "bfloat16" if trainer.bf16_generator_step else "float32",
        "generator_average_steps": trainer.averaged_steps(),
        "simultaneous_steps": trainer.critic_snapshot is not None,
    }


def simultaneous_steps(cfg: TrainConfig, expected_batch: int) -> bool:
    """``train.simultaneous_steps``, or where it is null, whether D's expected batch (the
    released row count times the sampling rate: public) reaches ``train.batch_size``, i.e.
    whether rows × ``max_sample_rate`` does. The same on every machine, a second core or
    not: a run's model does not depend on where it ran."""
    if cfg.simultaneous_steps is not None:
        return cfg.simultaneous_steps
    return expected_batch >= cfg.batch_size


def _new_generator(model: FittedModel) -> Generator:
    """A new generator for the model's table (new weights: the tilts are dropped)."""
    assert model.transformer is not None
    model.tilts.clear()
    model.frozen = None
    model.generator = Generator.for_table(model.model_config, model.transformer).to(model.device)
    return model.generator


def _conformed(df: pd.DataFrame, target: str, schema: Schema) -> pd.DataFrame:
    """The private rows checked against the schema. Nothing here counts the rows or their
    classes (δ is checked against released values)."""
    frame = schema.conform(df)
    check_target(frame, schema, target)
    return frame
