"""Typed configuration: the one shape every entry point, the Python API and Hydra share.

Hydra composes YAML from ``configs/`` and validates it against these dataclasses (they are
registered as structured-config schemas in :func:`register_configs`); library code only ever
sees these objects, never raw dicts.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class ColumnSpec:
    """One column of a declared public schema (see :mod:`rdpgan.data.schema`).

    ``kind`` is ``continuous`` (needs ``lo``/``hi``) or ``categorical`` (needs ``levels``).
    ``missing`` declares that the column may be empty; the empty value is then its own level
    (categorical) or a missing indicator (continuous). ``transform`` is a public, monotone
    re-scaling applied before the bounds map a continuous value into [-1, 1].
    """

    name: str = "???"
    kind: str = "???"
    lo: float | None = None
    hi: float | None = None
    integer: bool = False
    transform: str = "none"
    levels: list[Any] | None = None
    missing: bool = False
    # Continuous values that occur exactly and often (e.g. capital-gain = 0): each gets its own
    # code, so the generator need not place a number exactly on it.
    point_masses: list[float] = field(default_factory=list)
    # A value outside ``levels`` (categorical) or that is not a number (continuous) is read as
    # missing instead of being an error: schemas released privately keep only the levels common
    # enough to survive the noise, and cannot promise that every cell of a column parses.
    unlisted_as_missing: bool = False
    # Continuous: how the input spelled a missing value (e.g. "N", "NA"): such cells read as
    # missing, and missing values are written back so.
    missing_as: str | None = None
    # Continuous: dates or timestamps in this strftime format (e.g. "%Y-%m-%d"), held as days
    # since 1970-01-01 and written back in it.
    date_format: str | None = None
    # Categorical: the level every unlisted value reads as (a released schema's catch-all for
    # the values too rare to be released), instead of an error or missing.
    other: str | None = None


@dataclass
class DatasetConfig:
    """Where a table lives, how to read it, what to predict, and its declared public schema."""

    name: str = "???"
    file: str = "???"  # under the data root ...
    path: str | None = None  # ... or any CSV path (relative to the current directory)
    # pandas.read_csv options that describe the file format (header, separator, NA marker).
    header: bool = True
    column_names: list[str] | None = None
    sep: str | None = ","  # null: the most frequent of , ; tab | in the header line
    na_values: list[str] = field(default_factory=list)
    skipinitialspace: bool = False
    # The categorical column to condition on (None: one chosen from the released schema).
    target: str | None = None
    positive_label: Any = None
    columns: list[ColumnSpec] = field(default_factory=list)
    # Each row is held out when a hash of its own cells, keyed by split_seed (public), falls
    # below test_size (rdpgan.data.split); 0 trains on every row and holds none out.
    test_size: float = 0.2
    split_seed: int = 0


@dataclass
class SchemaConfig:
    """Where the column domains come from (see :mod:`rdpgan.privacy.private_schema`).

    ``declared``: the dataset's ``columns`` or the YAML ``file`` (public knowledge, free).
    ``private``: every column's kind, bounds and levels (and the target's classes) released with
    DP, paid with ``epsilon_fraction`` of the run's epsilon (unset: a share that follows the
    number of columns) and ``delta_fraction`` of its delta.
    ``unsafe_infer``: read off the data; the run is then marked NOT end-to-end private.
    """

    name: str = "declared"
    source: str = "declared"
    file: str | None = None
    # private: share of epsilon (None: from the number of columns, 5-50%, 5-30% below epsilon 1).
    epsilon_fraction: float | None = None
    # private: share of delta for the tail of partition selection (values found without candidates).
    delta_fraction: float = 0.1
    # Column -> continuous | categorical: public, overriding the released (or dtype) kind.
    types: dict[str, str] = field(default_factory=dict)
    # Column -> public candidate levels (private: then the only levels that can be released).
    candidates: dict[str, list[Any]] = field(default_factory=dict)
    drop: list[str] = field(default_factory=list)
    # unsafe_infer: a text column with more distinct values than this is dropped; private: at
    # most this many levels are kept, the most frequent (by noisy count).
    max_levels: int = 50
    # private: the quantiles that become a continuous column's bounds (None: chosen from the
    # released rows and the noise, keeping 99.5-98% of the values).
    quantiles: list[float] | None = None


@dataclass
class PrivacyConfig:
    """Which accountant tracks DP-SGD on the discriminator, and how noise is set.

    ``accountant`` is ``rdp`` (the paper's rdp_cgan), ``moments`` (its dp_cgan), ``prv``,
    ``gdp``, or ``none`` for the non-private baseline. With ``noise_multiplier`` unset, sigma is
    calibrated so that the planned epochs end exactly at the target epsilon; with it set,
    training runs until the next step would overspend and stops before it.
    """

    name: str = "rdp"
    accountant: str = "rdp"
    noise_multiplier: float | None = None
    max_grad_norm: float = 1.0
    # Gaussian noise (in counts) on the released label histogram the generator samples from.
    label_noise_multiplier: float = 10.0
    # Share of epsilon spent on the marginals (each feature's code distribution per class) that
    # the generator and the sampler match when model.marginal_weight > 0; sigma is calibrated
    # so that this release alone costs this fraction of the budget.
    marginals_fraction: float = 0.5
    # Share of epsilon (pure, exponential mechanism) for choosing which pairs of columns have
    # their joint distribution released (a spanning tree, strongest dependence first).
    selection_fraction: float = 0.05
    # Share of epsilon (Gaussian, calibrated alone) for the densities of the wide numeric
    # columns (rdpgan.measure.numeric_densities): G's bins are cut at equal released mass and a
    # number's place within its bin follows the density. 0: equal-width bins, uniform within.
    # 0.15 is the least round share the RDP accountant certifies at epsilon 1 (its orders stop
    # at 63, so one Gaussian release cannot be certified below epsilon ~0.11 at delta 1e-5).
    numeric_density_fraction: float = 0.15
    # Share of epsilon for the pairs chosen after training where the generator is furthest
    # from the rows (a quarter to choose them, the rest to measure them), which sampling rakes
    # toward (with model.marginal_weight > 0; only where it rakes). Reserved before DP-SGD.
    # 0: none. 0.25 over 0.1 and 0 on Adult's validation split at ε=8
    # (results/tuning_fidelity.csv: 2-way TVD at quantile bins 0.048 against 0.053 and 0.054).
    # Where sampling would not rake, the marginals get this share too, if DP-SGD keeps what the
    # shares leave it (rdpgan.adaptive.moves_to_marginals; round 30 of both tuning CSVs).
    adaptive_fraction: float = 0.25
    # What keys the secret randomness (Poisson masks, every DP noise draw, the fakes paired with
    # real rows). None: a 128-bit key from the operating system's entropy, fresh every run, so
    # knowing ``seed`` (written in run.json and model.json) reveals nothing. An integer makes
    # the run reproducible (tests, benchmarks): the ledger then marks it not end-to-end private,
    # and the number is never written to any file (see public_privacy_settings).
    noise_seed: int | None = None


@dataclass
class ModelConfig:
    """Sizes of the conditional generator and discriminator MLPs."""

    name: str = "default"
    latent_dim: int = 64
    generator_hidden: list[int] = field(default_factory=lambda: [256, 256])
    discriminator_hidden: list[int] = field(default_factory=lambda: [256, 256])
    gumbel_tau: float = 0.2
    # Straight-through Gumbel: G emits exact one-hot blocks in training too (soft gradients),
    # so D cannot tell fakes by their soft categorical values alone.
    straight_through: bool = True
    # Weight of the AC-GAN label loss (0: plain conditional D, label concatenated to the row).
    auxiliary_weight: float = 1.0
    # Weight of G's marginal loss: KL divergence from each released (DP) per-class code
    # distribution (and pair) to G's. 0: no release, no loss, no raking. 3 since round 15
    # (results/tuning_adult.csv).
    marginal_weight: float = 3.0
    # Rows per class over which the marginal loss averages G's code distributions (they are
    # probabilities, not samples, so a few rows estimate G's marginals well). 64 since round
    # 26 (results/tuning_fidelity.csv): level with 128 or better on Adult at ε = 8 and 1 and on
    # creditcard_aer, better fidelity on acs12 for 0.007 of its AUROC (400 validation rows),
    # and less work on the generator's thread (issue 29's AVX2 bar).
    marginal_rows: int = 64
    # Bins per wide numeric column in G's encoding (rdpgan.transform.DEFAULT_BINS).
    numeric_bins: int = 40
    # Sampling draws this many generated rows per row kept, and keeps those whose marginals
    # (each chosen pair's too) match the released ones: raking (rdpgan.postprocess). It brings
    # 2-way TVD closer and costs its pool in time; it repeated rows (about half of Adult's at
    # ε=8) until numbers were placed by released densities. 1: keep every generated row.
    # null: 32 (rdpgan.sampler.RAKING_POOL; 4 before b31ba30, so runs saved earlier with null
    # sample at 32 now) where the released marginals are precise, else 1
    # (rdpgan.sampler.RAKING_NOISE_LIMIT; what runs saved before 1 was the default record).
    sample_pool: int | None = None
    # Where sampling does not rake, it draws this many generated rows per row kept and keeps
    # rows whose column distributions within each class follow the pool's own (herding,
    # rdpgan.postprocess.herd): rows kept one by one as drawn scatter around G's distribution,
    # which on a table of a thousand rows is most of their distance from the real one. It
    # reads G's rows alone (post-processing, nothing released). 1: keep every generated row.
    # null: 16 (rdpgan.sampler.HERDING_POOL). Saved runs without this setting keep every row
    # (as they sampled).
    herding_pool: int | None = None
    # Whether herding also makes the kept rows follow the pool's joint distribution of every
    # pair of columns (rdpgan.sampler.herded_pairs): closer 2-way distributions, several
    # times slower sampling; its pool is then 64 (null herding_pool). null: on tables of at
    # most 16 feature columns, in calls for at most 4,096 rows (rdpgan.sampler's
    # HERDING_PAIR_COLUMNS, HERDING_PAIR_ROWS; the sample CLI decides once for its file).
    # Saved runs without this setting herd columns alone.
    herding_pairs: bool | None = None
    # Sampling shifts each code's logit, per class, so that G's expected code distribution of
    # every column within every class is the released one where they differ by more than its
    # noise (rdpgan.postprocess): post-processing (no privacy cost), a fit once per model
    # (0.5 s on Adult, results/speed.md) and no slower sampling, and it combines with raking. null:
    # where the released marginals are precise (rdpgan.sampler.TILT_NOISE_LIMIT; rounds
    # 19-20 of results/tuning_adult.csv). Saved runs without this setting sample untilted (from
    # the distribution they sampled; a seed's rows change with rdpgan's version).
    tilt_sampling: bool | None = None


@dataclass
class TrainConfig:
    """Optimisation settings; ``batch_size`` is the *expected* Poisson batch size."""

    name: str = "default"
    # Planned length; sigma is calibrated so these epochs end exactly at the target epsilon.
    epochs: float = 50.0
    # With privacy.noise_multiplier set, training runs until the budget is spent or this cap
    # (or max_steps; null lifts it).
    max_epochs: float | None = None
    # Most discriminator steps that epochs (or max_epochs) may ask for: past ~8,000 rows
    # (Adult's 50 epochs would be ~2,600 steps) a run's length stops growing with the table,
    # as the noise per row shrinks with n (results/scale.md). ``train=long`` allows 3,000.
    # null: no cap.
    max_steps: int | None = 800
    # If set (and sigma is calibrated), the number of discriminator steps, overriding epochs
    # and max_steps: a length that means the same on a 700-row table and a 30,000-row one.
    steps: int | None = None
    batch_size: int = 500
    # On a small table a full batch would be most of it, and privacy amplification by
    # subsampling would be lost: the sampling rate is capped instead (batch = rate × rows).
    max_sample_rate: float = 0.1
    generator_lr: float = 5e-4
    discriminator_lr: float = 5e-4
    betas: list[float] = field(default_factory=lambda: [0.5, 0.9])
    n_critic: int = 1
    # Most fake rows in a generator step (null: D's expected batch; never below 64). G's step
    # runs beside D's on a second core and, with D's 500, was the longer of the two: 256 took
    # a sixth off a default Adult run's loop under the AVX2 caps, its scores level within the
    # seeds on Adult (ε 8 and 1), nasscds and TV16 (tuning round 53, results/tuning_*.csv).
    generator_batch: int | None = 256
    # The generator's step (G on fakes, through the frozen D: no real row, no secret draw) in
    # bfloat16 where the hardware multiplies it natively (AVX-512 BF16 here: G's products run
    # ~2.7x faster, results/speed.md); D's private step stays float32.
    bf16_generator_step: bool = True
    # Decay of an exponential moving average of G's weights, taken after every G step; the
    # average is the generator that is saved and sampled (0: the last iterate). It is a
    # function of G's iterates alone, so it costs no privacy.
    generator_ema: float = 0.99
    # G's step scores its fakes with D as it was before D's step (a copy), so that all of it
    # runs beside the private D step on a second core (in one process its update too, once D
    # has drawn its fakes from G): a fifth off a default Adult run on 2 cores
    # (results/speed.md). null: where D's expected batch reaches batch_size (tables of ~5,000
    # rows or more); on the smallest table tried (1,319 rows) it cost AUROC and fidelity
    # (results/tuning_fidelity.csv, round 25).
    simultaneous_steps: bool | None = None
    progress: bool = True
    # Save the training state every this share of the planned discriminator steps (after the
    # first step, then in blocks): a crash or Ctrl-C loses at most two blocks, and privacy is
    # never charged further ahead of the last checkpoint (results/crash_resume.md).
    checkpoint_share: float = 0.02
    # Blocks of this many steps instead (0: by checkpoint_share).
    checkpoint_every: int = 0
    # CPU threads for torch (null: rdpgan.threads' policy, one; see results/speed.md).
    threads: int | None = None


# Training settings added after runs had been recorded without them, with the value those
# runs trained with (the defaults have since changed): a run record or a saved model that
# lacks one means this, not today's default.
RECORDED_BEFORE: dict[str, Any] = {
    "max_steps": None,  # before cfd540e: no cap on the steps epochs ask for
    "bf16_generator_step": False,
    "generator_ema": 0.0,
    "simultaneous_steps": False,
    "generator_batch": None,
}


# Training settings that runs once recorded and that no longer exist: checkpoints once came
# by measured pace (a pace that follows the secret batch sizes), now by steps alone.
RETIRED = ("checkpoint_seconds", "first_checkpoint_seconds")


def with_absent_train_settings(train: dict[str, Any]) -> dict[str, Any]:
    """A recorded ``train`` section, with :data:`RECORDED_BEFORE` for the settings it lacks
    and without the :data:`RETIRED` ones."""
    kept = {key: value for key, value in train.items() if key not in RETIRED}
    return {**RECORDED_BEFORE, **kept}


@dataclass
class SampleConfig:
    n: int | None = None


@dataclass
class DataConfig:
    root: str | None = None


@dataclass
class RunConfig:
    """Everything one ``python -m rdpgan.train`` run needs."""

    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    schema: SchemaConfig = field(default_factory=SchemaConfig)
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)
    data: DataConfig = field(default_factory=DataConfig)
    epsilon: float = 8.0
    delta: float = 1e-5
    seed: int = 0
    device: str = "auto"
    evaluate: bool = False
    # Continue the checkpointed run in hydra.run.dir (same data, same settings).
    resume: bool = False


@dataclass
class EvaluateConfig:
    """``python -m rdpgan.evaluate``: which run to score, and how."""

    run_dir: str = "???"
    seed: int = 0
    real: bool = True  # also score the real train split (the reference row)
    n_jobs: int = 2
    # The categorical column the classifiers predict (default: the run's target), and its
    # class scored as positive (default: the later of two).
    column: str | None = None
    positive_label: Any = None


@dataclass
class SampleCliConfig:
    """``python -m rdpgan.sample``: draw rows from a saved run into a CSV or Parquet file."""

    run_dir: str = "???"
    out: str = "???"  # .csv or .parquet; relative to the current directory
    n: int | None = None  # default: the model's released (noisy) row count
    label: Any = None  # a class of the target: only rows of that class
    # Only rows that meet these: {column: level, number, or [low, high]} (rdpgan.conditions).
    conditions: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None  # default: the model's training seed
    chunk_size: int = 100_000  # rows generated and written at a time (bounds memory)
    # The model's sampling settings for this file (null: as the run chose them): generated rows
    # per row kept when raking (1: no raking, faster) and where it does not rake (herding_pool;
    # 1: every generated row), whether herding follows pairs of columns, and whether sampling
    # is tilted.
    sample_pool: int | None = None
    herding_pool: int | None = None
    herding_pairs: bool | None = None
    tilt_sampling: bool | None = None


@dataclass
class ReportConfig:
    """``python -m rdpgan.report``: the privacy report (guarantee + audit) of a finished run."""

    run_dir: str = "???"
    seed: int = 0  # which rows the audit samples


def public_privacy_settings(privacy: PrivacyConfig) -> dict[str, Any]:
    """The privacy settings as they may be written down: without ``noise_seed``, which keys
    the secret randomness the guarantee rests on."""
    settings = asdict(privacy)
    del settings["noise_seed"]
    return settings


def public_run_settings(cfg: RunConfig) -> dict[str, Any]:
    """A run's settings for ``run.json``: everything but ``privacy.noise_seed``."""
    settings = asdict(cfg)
    settings["privacy"] = public_privacy_settings(cfg.privacy)
    return settings


@functools.cache
def register_configs() -> None:
    """Register the dataclasses so Hydra type-checks every YAML group against them (once a
    process: each registration builds the structured configs again, 50 ms of a command's
    start)."""
    store = ConfigStore.instance()
    store.store(name="run_schema", node=RunConfig)
    store.store(group="dataset", name="dataset_schema", node=DatasetConfig)
    store.store(group="schema", name="schema_config", node=SchemaConfig)
    store.store(group="privacy", name="privacy_schema", node=PrivacyConfig)
    store.store(group="model", name="model_schema", node=ModelConfig)
    store.store(group="train", name="train_schema", node=TrainConfig)
    store.store(name="evaluate_schema", node=EvaluateConfig)
    store.store(name="sample_schema", node=SampleCliConfig)
    store.store(name="report_schema", node=ReportConfig)
