"""A model's settings and what fitting it left: the generator, the transformer, the released
statistics and the ledger; written by ``save`` and read back by ``load``.

Fitting (:mod:`rdpgan.fitting`) fills this in; sampling (:mod:`rdpgan.sampler`) reads it. Both
saved files are plain: the weights are a numpy ``.npz`` read without pickles and the rest is
JSON, so loading a model never executes code from the file, and imports neither torch nor the
DP machinery (Opacus, the accountants).
"""

from __future__ import annotations

import lzma
import math
import pickle
import warnings
import zipfile
import zlib
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rdpgan.config import (
    ModelConfig,
    PrivacyConfig,
    TrainConfig,
    public_privacy_settings,
    with_absent_train_settings,
)
from rdpgan.data.schema import Schema
from rdpgan.errors import UserInputError
from rdpgan.frozen import CodeLayout, FrozenGenerator, weights_of
from rdpgan.io import atomic_write, read_json, write_json
from rdpgan.marginals import PAIR_MARGINALS, Marginals
from rdpgan.privacy.budget import LEDGER_FILE, NON_PRIVATE, validate_budget
from rdpgan.sampler import Sampler, Tilts, check_seed
from rdpgan.selfcheck import NoiseStds, ReleaseGap
from rdpgan.settings import validate_settings
from rdpgan.transform import TableTransformer

if TYPE_CHECKING:  # what fitting leaves: a loaded model has neither (it reads privacy.json)
    import torch

    from rdpgan.models import Generator
    from rdpgan.privacy.ledger import PrivacyLedger

# 2: G normalises rows with LayerNorm (format 1's BatchNorm coupled the rows of a batch).
# 3: numeric columns as codes (bins, point masses, missing) plus a within-bin position, and
#    released marginals instead of class profiles.
# 4: wide numeric columns cut at equal mass of a released density, positions drawn from it
#    (the generator no longer emits a position).
# 5: the generator's weights as numpy arrays (model.npz), sampled without torch.
# 6: numeric columns coded as finely as the noise allows ("resolution", rdpgan.resolution);
#    format 5 is still read, at the configured resolution it was coded at.
MODEL_FORMAT = 6
READ_FORMATS = (MODEL_FORMAT, 5)
WEIGHTS_FILE = "model.npz"
# Format 4 (model.pt, torch's weights-only archive) is still read, with torch: runs and
# checkpoints saved before format 5 load, sample and resume as they did.
TORCH_FORMAT, TORCH_WEIGHTS_FILE = 4, "model.pt"
# What format 4's model settings had that format 5's have not.
DROPPED_SETTINGS = ("bf16_sampling",)
# Settings a model.json saved before them lacks, as those runs sampled: untilted, keeping every
# generated row where they did not rake (no herding), and herding columns alone.
RECORDED_BEFORE = {"tilt_sampling": False, "herding_pool": 1, "herding_pairs": False}


class FittedModel:
    """Settings, generator and released statistics of one conditional GAN."""

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
        check_seed("seed", seed)
        self.seed = seed
        # Resolved when fitting (rdpgan.models.resolve_device): sampling runs on the CPU.
        self.device_name = device
        if self.privacy.accountant != NON_PRIVATE:
            validate_budget(epsilon, delta)
        validate_settings(self.privacy, self.model_config, self.train_config)
        # The torch generator that fitting trains, or (a loaded model) its frozen weights.
        self.generator: Generator | None = None
        self.frozen: FrozenGenerator | None = None
        self.transformer: TableTransformer | None = None
        self.ledger: PrivacyLedger | None = None
        self.label_probs: np.ndarray | None = None
        self.marginals: Marginals | None = None
        # Released densities of the wide numeric columns, by name (empty: none released).
        self.densities: dict[str, list[float]] = {}
        # Whether the pairs chosen after training were drawn (or begun): never twice.
        self.adaptive_drawn = False
        self.positive_label: Any = None
        self.released_rows = 0
        # (Bins per wide numeric column, most integer values coded one each), planned from
        # the released row count and the budget (rdpgan.resolution).
        self.resolution: tuple[int, int] | None = None
        # The noise std on one released count of the marginals (public: from the ledger).
        self.marginal_noise = 0.0
        self.metrics: dict[str, Any] = {}
        self.tilts = Tilts()
        # Opt-outs of the run that trained this model (from its ledger, or model.json on load).
        self.privacy_notes: list[str] = []

    def __getstate__(self) -> dict[str, Any]:
        """A copy (pickle, copy, deepcopy) without ``privacy.noise_seed``, which keys the
        secret noise and must stay where it was given (a copy that is fitted draws fresh OS
        entropy), and with tilts of its own (fitted again when it first samples: a copy that
        is refitted must not hand its tilts to the original)."""
        state = dict(self.__dict__)
        state["privacy"] = replace(self.privacy, noise_seed=None)
        state["tilts"] = Tilts()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("resolution", None)  # (pickled before it was planned)
        if "device_name" not in state:  # pickled before sampling was numpy (format 5)
            state["device_name"] = str(state.pop("device", "auto"))
            state["frozen"] = None
            state["model_config"] = _without_dropped(state["model_config"])
        if "marginal_noise" not in state:  # pickled before the sampler was a module of its own
            state.pop("_tilts", None)
            state["tilts"] = Tilts()
            state["marginal_noise"] = state.pop("recorded_marginal_noise", 0.0)
            if state.get("ledger") is not None:  # (its classes are loaded: unpickled with it)
                from rdpgan.measure import marginal_noise

                state["marginal_noise"] = marginal_noise(state["ledger"])
        self.__dict__.update(state)

    @property
    def device(self) -> torch.device:
        """The device fitting trains on (``auto``: a CUDA GPU where one is present)."""
        from rdpgan.models import resolve_device

        return resolve_device(self.device_name)

    @property
    def sampler(self) -> Sampler:
        """This model's generator and releases as a :class:`~rdpgan.sampler.Sampler` (with
        the settings of the moment: ``model_config`` may change how a loaded model samples).
        A fitted model's torch generator is frozen anew each time: training changes its
        weights in place."""
        if self.transformer is None or self.label_probs is None:
            raise RuntimeError("fit or load the model before sampling")
        generator = self.frozen
        if self.generator is not None:  # (laid out from the transformer, as old pickles need)
            generator = self.freeze(weights_of(self.generator))
        if generator is None:
            raise RuntimeError("fit or load the model before sampling")
        return Sampler(
            generator,
            self.transformer,
            self.label_probs,
            self.released_rows,
            self.marginals,
            self.marginal_noise,
            self.model_config,
            self.seed,
            self.tilts,
        )

    def release_gaps(self, codes: np.ndarray, labels: np.ndarray) -> list[ReleaseGap]:
        """How far rows sampled from this model (their codes and label codes) sit from its
        releases, each in its own noise (from the run's ledger): :mod:`rdpgan.selfcheck`."""
        noise = NoiseStds.from_ledger(self.ledger, self.marginal_noise)
        pair_release = self.ledger.find(PAIR_MARGINALS) if self.ledger is not None else None
        released_pairs = None if pair_release is None else int(pair_release.details["tables"])
        return self.sampler.release_gaps(codes, labels, noise, released_pairs)

    def freeze(self, state: dict[str, np.ndarray]) -> FrozenGenerator:
        """A generator for sampling from saved weights ``state``, laid out for this model's
        table and settings (ValueError: weights of another shape, or not finite numbers)."""
        assert self.transformer is not None
        layout = CodeLayout(self.transformer.spans, self.transformer.width)
        frozen = FrozenGenerator(state, layout, self.transformer.n_classes)
        config = self.model_config
        if frozen.latent_dim != config.latent_dim or frozen.hidden != list(config.generator_hidden):
            raise ValueError("the weights are not of the model's generator")
        return frozen

    def save(self, directory: str | Path) -> Path:
        """Write ``model.npz`` (generator weights only), ``model.json`` and ``privacy.json``."""
        if self.generator is None or self.transformer is None or self.ledger is None:
            raise RuntimeError("fit the model before saving it")
        directory = Path(directory)
        state = weights_of(self.generator)
        atomic_write(directory / WEIGHTS_FILE, lambda tmp: _save_arrays(tmp, state))
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
            # Planned from released values (rdpgan.resolution): how numbers were coded.
            "resolution": [self.transformer.n_bins, self.transformer.grid_limit],
            "adaptive_drawn": self.adaptive_drawn,
            "marginal_noise": self.marginal_noise,
            # Raking or not, as the self-check chose it (None: not yet chosen).
            "chosen_pool": self.tilts.pool,
            # Sampling's tilt per class and column, as fitted (None: not yet): a loaded model
            # samples without fitting it again (most of a small call's time).
            "tilts": None
            if self.tilts.fitted is None
            else [[block.tolist() for block in blocks] for blocks in self.tilts.fitted],
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
    def from_description(cls, meta: dict[str, Any], device: str) -> Any:
        """A model with everything but weights rebuilt from :meth:`describe`'s JSON (of this
        format or :data:`TORCH_FORMAT`'s)."""
        if meta.get("format") not in (*READ_FORMATS, TORCH_FORMAT):
            raise UserInputError("the saved model has an unknown format version")
        settings = {k: v for k, v in meta["model"].items() if k not in DROPPED_SETTINGS}
        model = cls(
            epsilon=meta["epsilon"],
            delta=meta["delta"],
            privacy=PrivacyConfig(**meta["privacy"]),
            model=ModelConfig(**{**RECORDED_BEFORE, **settings}),
            train=TrainConfig(**with_absent_train_settings(meta["train"])),
            seed=meta["seed"],
            device=device,
        )
        model.densities = {str(k): list(v) for k, v in meta["densities"].items()}
        model.adaptive_drawn = bool(meta["adaptive_drawn"])
        # (Models saved before it was planned are coded at the configured resolution.)
        bins, grid_limit = meta.get("resolution") or (model.model_config.numeric_bins, None)
        model.transformer = TableTransformer(
            Schema.from_specs(meta["schema"]), meta["target"], bins, model.densities, grid_limit
        )
        model.resolution = (model.transformer.n_bins, model.transformer.grid_limit)
        model.positive_label = meta["positive_label"]
        model.privacy_notes = list(meta.get("privacy_notes", []))
        model.label_probs = np.asarray(meta["label_probs"], dtype=float)
        probs = model.label_probs
        if probs.shape != (model.transformer.n_classes,) or not np.isfinite(probs).all():
            raise ValueError("the released label frequencies do not fit the target")
        if (probs < 0).any() or not math.isclose(probs.sum(), 1.0, abs_tol=1e-6):
            raise ValueError("the released label frequencies are not frequencies")
        marginals = meta["marginals"]
        model.marginals = None if marginals is None else Marginals.from_dict(marginals)
        model.released_rows = int(meta["released_rows"])
        # Models saved before it name their sample_pool; unknown noise is not raked toward.
        model.marginal_noise = float(meta.get("marginal_noise", math.inf))
        chosen = meta.get("chosen_pool")  # (models saved before it choose at their first call)
        model.tilts.pool = None if chosen is None else int(chosen)
        layout = CodeLayout(model.transformer.spans, model.transformer.width)
        model.tilts.fitted = _saved_tilts(meta.get("tilts"), layout, model.transformer.n_classes)
        return model

    @classmethod
    def load(cls, directory: str | Path, device: str = "auto") -> Any:
        """The model :meth:`save` wrote to ``directory``, ready to sample (on the CPU:
        ``device`` is where the model would be fitted again)."""
        directory = Path(directory)
        try:
            meta = read_json(directory / "model.json")
            model = cls.from_description(meta, device)
            model.frozen = model.freeze(_read_weights(directory, meta["format"]))
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
            IndexError,
            MemoryError,  # (an archive member whose header declares an absurd shape)
            OverflowError,
            zipfile.BadZipFile,
            zlib.error,
            lzma.LZMAError,
            pickle.UnpicklingError,  # (a format-4 model.pt that is not weights alone)
        ) as exc:
            raise UserInputError(f"the model in {directory} is damaged or incompatible") from exc
        return model


def _read_weights(directory: Path, model_format: int) -> dict[str, np.ndarray]:
    """The generator's weights as saved: ``model.npz`` (no pickles), or a format-4 run's
    ``model.pt``, read with torch's weights-only loader (which executes nothing)."""
    if model_format == TORCH_FORMAT:
        import torch  # (only for runs saved before format 5)

        with warnings.catch_warnings():  # torch warns in several lines about bad archives
            warnings.simplefilter("ignore")
            state = torch.load(
                directory / TORCH_WEIGHTS_FILE, map_location="cpu", weights_only=True
            )
        return {name: tensor.numpy() for name, tensor in state.items()}
    with np.load(directory / WEIGHTS_FILE, allow_pickle=False) as arrays:
        return {name: arrays[name] for name in arrays.files}


def _without_dropped(config: ModelConfig) -> ModelConfig:
    """A pickled model's settings, without :data:`DROPPED_SETTINGS` (its dataclass is today's:
    an old pickle restores them as attributes)."""
    for name in DROPPED_SETTINGS:
        config.__dict__.pop(name, None)
    return config


def _save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as file:  # (a path not ending in .npz would get the suffix added)
        np.savez(file, **arrays)


def _saved_tilts(
    saved: list[list[list[list[float]]]] | None, layout: CodeLayout, classes: int
) -> list[list[np.ndarray]] | None:
    """The tilts a model was saved with (None: fitted at its first call), checked against its
    generator's layout: per class, one finite [blocks, width] array per bucket (ValueError if
    not)."""
    if saved is None:
        return None
    tilts = [[np.asarray(bucket, dtype=float) for bucket in buckets] for buckets in saved]
    shapes = [tuple(shape) for shape in layout.bucket_shapes]
    if len(tilts) != classes or any(
        [b.shape for b in buckets] != shapes or not all(np.isfinite(b).all() for b in buckets)
        for buckets in tilts
    ):
        raise ValueError("the saved tilts do not fit the generator")
    return tilts
