"""Neighbouring tables: one row added or removed moves each release by at most its sensitivity.

Every random draw is fixed except the membership of one row x: the Poisson mask bit, latent
vector, label and Gumbel noise "attached" to each row stay the same in both tables, and x is
inserted at a random position (so every row after it changes index). The noise is left out:
what is compared is the noiseless quantity the mechanism adds noise to.

- A private discriminator step (the product's own CGANTrainer.discriminator_step, with both
  critics, batches larger than the expected batch, and empty batches): the clipped sum of
  per-pair gradients changes by exactly x's own clipped pair gradient, so by at most C in L2.
- Each sampling-rate-1 release: the label histogram (L2 sensitivity 1), the marginals (every
  feature's [class, code] counts, sqrt(features)), the pair selection's utilities (1, with the
  epsilon its exponential mechanisms use charged), the pair marginals (sqrt(pairs)), and the
  private schema's queries on raw cells: value profiles, candidate counts, the stability
  histogram's counts and the quantile scores (sensitivity 1 each, with the epsilons and deltas
  they use adding up to no more than the ledger's entry).

A control shows the check has power: with BatchNorm in G (the coupling this file was written
to catch), the other pairs' fakes move and the bound is broken.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import norm

from rdpgan import adaptive, fitting, measure, sampler
from rdpgan.config import DatasetConfig, ModelConfig, SchemaConfig, TrainConfig
from rdpgan.data.discretize import table_sizes
from rdpgan.data.loading import load_tables
from rdpgan.data.schema import Schema
from rdpgan.errors import UserInputError
from rdpgan.models import Discriminator, Generator
from rdpgan.privacy import private_schema as private_schema_module
from rdpgan.privacy.dp_sgd import DPSGD
from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.privacy.mechanisms.gaussian import snap_grid
from rdpgan.privacy.private_schema import SchemaBudget
from rdpgan.privacy.randomness import SecretRandomness, exact_sample_rate
from rdpgan.privacy.schema import bounds as schema_bounds
from rdpgan.privacy.schema import counts as schema_counts
from rdpgan.privacy.schema.profiles import (
    candidate_counts,
    magnitude_bands,
    value_counts,
    value_profile,
)
from rdpgan.synthesizer import DPCGAN
from rdpgan.training import CGANTrainer
from rdpgan.transform import TableTransformer

SLACK = 1e-6
CLIP = 0.1  # small: every pair is clipped (the tests also use a large one)
SPECS = [
    {"name": "x", "kind": "continuous", "lo": -5, "hi": 5},
    {
        "name": "n",
        "kind": "continuous",
        "lo": 0,
        "hi": 1e6,
        "transform": "log1p",
        "point_masses": [0],
        "missing": True,
    },
    {"name": "c", "kind": "categorical", "levels": ["a", "b", "c"], "missing": True},
    # Integers: a code per value (at most 100 of them, one a point mass), and bins (more).
    {"name": "k", "kind": "continuous", "lo": 0, "hi": 60, "integer": True, "point_masses": [7]},
    {"name": "w", "kind": "continuous", "lo": 0, "hi": 5000, "integer": True},
    {"name": "y", "kind": "categorical", "levels": [0, 1]},
]
SCHEMA = Schema.from_specs(SPECS)
TRANSFORMER = TableTransformer(SCHEMA, "y")
# A coarse plan (rdpgan.resolution): 20 bins, and k's 61 integers cut into them, with a density.
COARSE = TableTransformer(SCHEMA, "y", 20, grid_limit=20)
BOTH = pytest.mark.parametrize("transformer", [TRANSFORMER, COARSE], ids=["configured", "coarse"])


def random_rows(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Rows anywhere in (and beyond) the schema's domain: extremes, point masses, missing."""
    return pd.DataFrame(
        {
            "x": rng.choice([rng.normal(0, 3), -1e300, 1e300, 5.0], size=n),
            "n": rng.choice([0.0, np.nan, 3.0, 1e12, float(rng.integers(0, 10**6))], size=n),
            "c": rng.choice(["a", "b", "c", None], size=n),
            "k": rng.choice([7, -3, 99, 60, int(rng.integers(0, 61))], size=n),
            "w": rng.choice([0, 5000, 10**7, int(rng.integers(0, 5001))], size=n),
            "y": rng.integers(0, 2, size=n),
        }
    )


def encoded(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    frame = SCHEMA.conform(frame)
    return TRANSFORMER.encode(frame), TRANSFORMER.encode_labels(frame)


class ScriptedRandomness:
    """SecretRandomness with every draw given in advance, and no noise: the batch rows and,
    for each of them in batch order, a label code, a latent vector and Gumbel uniforms."""

    def __init__(self, rows, codes, latents, uniforms):
        self.rows, self.codes = rows, codes
        self.latents, self.uniforms = latents, uniforms

    def poisson_indices(self, n_rows: int, sample_rate: float) -> np.ndarray:
        return self.rows

    def categorical(self, probs: np.ndarray, n: int) -> np.ndarray:
        assert n == len(self.codes)
        return self.codes

    def standard_normal(self, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
        assert self.latents.shape == shape
        return torch.as_tensor(self.latents)

    def open_uniform(self, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
        assert self.uniforms.shape == shape
        return torch.as_tensor(self.uniforms)

    def gaussian_noise(self, reference: torch.Tensor, std: float) -> torch.Tensor:
        return torch.zeros_like(reference)

    def independent(self, stream: int) -> ScriptedRandomness:
        return self  # (its noise: none, on any thread)


def scripted_trainer(
    generator, discriminator, features, labels, attached, sampled, auxiliary, clip=CLIP, secret=None
):
    """The product's trainer and DP-SGD critic on copies of the networks, with the draws of the
    rows ``sampled`` scripted and no noise (or every draw from ``secret``, a real source)."""
    generator, discriminator = copy.deepcopy(generator), copy.deepcopy(discriminator)
    if secret is None:
        rows = np.flatnonzero(sampled)
        secret = ScriptedRandomness(rows, *(part[rows] for part in attached))
    ledger = PrivacyLedger(1e6, 1e-5, "rdp")
    release = ledger.open_dp_sgd("dp_sgd", 1.0, 0.5, max_steps=10)
    critic = DPSGD(
        discriminator,
        torch.optim.SGD(discriminator.parameters(), lr=0.0),
        ledger=ledger,
        release=release,
        max_grad_norm=clip,
        expected_batch_size=4,  # below most batches here: no fake count may follow |B|
        secret=secret,
    )
    trainer = CGANTrainer(
        generator,
        critic,
        torch.optim.SGD(generator.parameters(), lr=0.0),
        torch.as_tensor(features),
        torch.as_tensor(labels),
        torch.tensor([0.5, 0.5]),
        secret,
        exact_sample_rate(0.5),
        4,
        auxiliary_weight=auxiliary,
    )
    return trainer, critic


def clipped_sum(**arguments) -> torch.Tensor:
    """The noiseless clipped sum of one real discriminator step over the rows ``sampled``."""
    trainer, critic = scripted_trainer(**arguments)
    try:
        trainer.discriminator_step()
    finally:
        trainer.close()
    return torch.cat([p.summed_grad.flatten() for p in critic.optimizer.params])


def attached_draws(rng: np.random.Generator, generator: Generator, n: int) -> tuple:
    """One (label code, latent, Gumbel uniforms) per row, used when the row is sampled."""
    return (
        rng.integers(0, 2, size=n),
        rng.standard_normal((n, generator.latent_dim)).astype(np.float32),
        rng.uniform(1e-6, 1.0, size=generator.gumbel_shape(n)).astype(np.float32),
    )


def step_changes(
    generator, auxiliary: float, trials: int, seed: int, clip=CLIP, rates=(0.0, 0.3, 1.0)
) -> tuple[float, float]:
    """Over ``trials`` random (table, x, draws): the largest L2 change of the clipped sum, and
    the largest distance between that change and x's own clipped pair gradient (0 when the
    pairs are independent; nan when ``rates`` has no empty batches, as x alone would be a
    one-row batch). ``rates`` cycle through empty batches, typical ones and whole tables."""
    rng = np.random.default_rng(seed)
    worst = worst_residual = 0.0
    for trial in range(trials):
        n = int(rng.integers(2, 30))
        features, labels = encoded(random_rows(rng, n + 1))
        attached = attached_draws(rng, generator, n + 1)
        rate = rates[trial % len(rates)]
        sampled = rng.random(n + 1) < rate
        sampled[n] = trial % 5 != 0  # x (the last row, moved to a random place) mostly in
        where = int(rng.integers(0, n + 1))
        order = np.r_[np.arange(n)[:where], n, np.arange(n)[where:]]  # x inserted at `where`
        torch.manual_seed(trial)
        discriminator = Discriminator(TRANSFORMER.width, 2, [16], auxiliary > 0)
        common = dict(generator=generator, discriminator=discriminator, auxiliary=auxiliary)
        common["clip"] = clip
        bigger = dict(
            features=features[order],
            labels=labels[order],
            attached=tuple(part[order] for part in attached),
        )
        without_x = clipped_sum(
            features=features[:n],
            labels=labels[:n],
            attached=tuple(part[:n] for part in attached),
            sampled=sampled[:n],
            **common,
        )
        with_x = clipped_sum(sampled=sampled[order], **bigger, **common)
        only_x = np.arange(n + 1) == where
        worst = max(worst, float((with_x - without_x).norm()))
        if 0.0 in rates:
            own = clipped_sum(sampled=only_x, **bigger, **common) if sampled[n] else 0.0
            worst_residual = max(worst_residual, float((with_x - without_x - own).norm()))
    return worst, worst_residual if 0.0 in rates else math.nan


def test_a_discriminator_step_draws_nothing_from_the_global_streams():
    """The public stream (seed's: the generator step, the profile loss) must not follow |B|,
    and no secret draw may come from a global generator: a real source, batches of any size."""
    rng = np.random.default_rng(0)
    generator = make_generator()
    features, labels = encoded(random_rows(rng, 30))
    discriminator = Discriminator(TRANSFORMER.width, 2, [16], True)
    for rate in (2.0**-20, 0.5, 1.0):
        trainer, critic = scripted_trainer(
            generator=generator,
            discriminator=discriminator,
            features=features,
            labels=labels,
            attached=None,
            sampled=None,
            auxiliary=1.0,
            secret=SecretRandomness(),
        )
        trainer.sample_rate = exact_sample_rate(rate)
        torch.manual_seed(0)
        np.random.seed(0)
        trainer.discriminator_step()
        trainer.close()
        assert torch.equal(torch.get_rng_state(), torch.manual_seed(0).get_state())
        assert np.random.random() == np.random.RandomState(0).random()  # nothing drawn before
        assert all(torch.isfinite(p.grad).all() for p in critic.optimizer.params)


def make_generator(seed: int = 0) -> Generator:
    torch.manual_seed(seed)
    return Generator(8, 2, [16, 16], TRANSFORMER.spans, TRANSFORMER.width, straight_through=True)


@pytest.mark.parametrize("clip", [CLIP, 10.0], ids=["every_pair_clipped", "few_clipped"])
@pytest.mark.parametrize("auxiliary", [0.0, 1.0], ids=["conditional_critic", "ac_gan_critic"])
def test_a_discriminator_step_moves_by_exactly_one_clipped_pair(auxiliary, clip):
    worst, residual = step_changes(make_generator(), auxiliary, 45, int(auxiliary), clip)
    assert worst <= clip + SLACK
    assert residual <= 1e-5  # the change is x's own pair, no other term moved
    assert worst > 0.01  # x's own pair does show: the comparison is not vacuous


def test_control_a_batch_coupled_generator_breaks_the_bound():
    """G with BatchNorm in training mode (what G had before): adding x moves every fake."""
    generator = make_generator()
    for i, layer in enumerate(generator.body):
        if isinstance(layer, torch.nn.LayerNorm):
            generator.body[i] = torch.nn.BatchNorm1d(layer.normalized_shape[0])
    # Whole tables of 2+ rows: BatchNorm refuses a one-row batch in training mode.
    worst, _ = step_changes(generator, 1.0, trials=15, seed=7, rates=(1.0,))
    assert worst > CLIP + 1e-3


def test_the_generator_makes_each_row_from_its_own_draws():
    """Fake j is a function of draw j alone, in a batch of any size."""
    generator = make_generator()
    rng = np.random.default_rng(0)
    z = torch.as_tensor(rng.standard_normal((50, 8)).astype(np.float32))
    y = torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, 2, 50)), 2).float()
    u = torch.as_tensor(rng.uniform(1e-6, 1, generator.gumbel_shape(50)).astype(np.float32))
    whole = generator(z, y, uniform=u)
    alone = torch.cat([generator(z[[i]], y[[i]], uniform=u[[i]]) for i in range(50)])
    torch.testing.assert_close(whole, alone)  # (the matrix products may round per batch)
    # Past the matrix products, the block softmaxes and argmaxes work row by row, exactly.
    cells = torch.as_tensor(rng.standard_normal((50, len(generator.cells))), dtype=torch.float32)
    probs, chosen = generator._softmax(cells, argmax=True)
    for i in range(50):
        probs_i, chosen_i = generator._softmax(cells[[i]], argmax=True)
        assert torch.equal(probs[[i]], probs_i) and torch.equal(chosen[[i]], chosen_i)
    with pytest.raises(ValueError, match="shape"):  # one row's draws broadcast to every row
        generator(z, y, uniform=u[:1])


class ZeroNoise:
    """Stands in for the secret numpy Generator: every noise draw is 0, so a release is its
    query; the standard deviations asked for are kept, to compare with the ledger."""

    def __init__(self) -> None:
        self.scales: list[float] = []

    def normal(self, loc, scale, size):
        self.scales.append(float(scale))
        return np.zeros(size)


def assert_noise_matches_the_ledger(noise: ZeroNoise, ledger: PrivacyLedger) -> float:
    """The release drew N(0, (sigma * sensitivity)^2), as its ledger entry declares; returns
    the declared sensitivity."""
    release = ledger.releases[-1]
    sensitivity = release.details["sensitivity"]
    assert noise.scales == [pytest.approx(release.noise_multiplier * sensitivity, rel=1e-12)]
    return sensitivity


def neighbours(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A random table and the same table with one random row x inserted somewhere."""
    rng = np.random.default_rng(seed)
    table = random_rows(rng, int(rng.integers(0, 40)))
    x = random_rows(rng, 1)
    where = int(rng.integers(0, len(table) + 1))
    return table, pd.concat([table.iloc[:where], x, table.iloc[where:]], ignore_index=True)


def test_the_label_histogram_moves_by_at_most_its_declared_sensitivity():
    for seed in range(200):
        releases, declared = [], set()
        for table in neighbours(seed):
            ledger, noise = PrivacyLedger(8.0, 1e-5, "rdp"), ZeroNoise()
            releases.append(measure.label_counts(encoded(table)[1], 2, ledger, 10.0, noise))
            declared.add(assert_noise_matches_the_ledger(noise, ledger))
        (sensitivity,) = declared
        assert np.linalg.norm(releases[1] - releases[0]) <= sensitivity + SLACK


def spy_on_releases(monkeypatch) -> list[tuple[str, np.ndarray]]:
    """Record every table release of ``measure._gaussian_tables``, by name, stacked, whatever
    query made it: the exact vector its one Gaussian draw (``measure.noisy_tables``) adds
    noise to. With ``ZeroNoise`` both what the draw returns and what the release returns must
    be that vector, up to rounding to the release's public grid (post-processing): a shift
    after the draw, or a query other than the one drawn for, fails."""
    released: list[tuple[str, np.ndarray]] = []
    release, draw = measure._gaussian_tables, measure.noisy_tables
    grids: list[float] = []

    def named(name, tables, ledger, *args):
        out = release(name, tables, ledger, *args)
        if ledger.private:
            (grid,) = grids
            grids.clear()
            returned = np.concatenate([table.ravel() for table, _ in out])
            np.testing.assert_allclose(returned, released[-1][1], rtol=0, atol=grid / 2 + 1e-9)
            released[-1] = (name, released[-1][1])
        return out

    def drawn(tables, std, rng):
        out = draw(tables, std, rng)
        stacked = np.concatenate([table.ravel() for table in tables])
        noiseless = np.concatenate([table.ravel() for table in out])
        np.testing.assert_allclose(noiseless, stacked, rtol=0, atol=snap_grid(std) / 2 + 1e-9)
        grids.append(snap_grid(std))
        released.append(("unnamed", stacked))
        return out

    monkeypatch.setattr(measure, "_gaussian_tables", named)
    monkeypatch.setattr(measure, "noisy_tables", drawn)
    return released


@BOTH
def test_the_marginals_move_by_at_most_their_declared_sensitivity(transformer, monkeypatch):
    """The stacked [class, code] tables of every feature: one row moves one cell of each, at
    any resolution."""
    released = spy_on_releases(monkeypatch)
    worst, declared = 0.0, set()
    for seed in range(200):
        released.clear()
        for table in neighbours(seed):
            ledger, noise = PrivacyLedger(8.0, 1e-5, "rdp"), ZeroNoise()
            frame = SCHEMA.conform(table)
            codes = transformer.codes(transformer.encode(frame))
            labels = transformer.encode_labels(frame)
            measure.marginals(codes, labels, transformer.code_sizes, 2, ledger, 0.5, noise)
            declared.add(assert_noise_matches_the_ledger(noise, ledger))
        worst = max(worst, float(np.linalg.norm(released[1][1] - released[0][1])))
    (sensitivity,) = declared
    assert sensitivity == pytest.approx(math.sqrt(len(transformer.code_sizes)))
    assert worst <= sensitivity + SLACK
    assert worst == pytest.approx(sensitivity)  # every added row reaches the bound: it is tight


@pytest.mark.parametrize(
    ("transformer", "wide"),
    [(TRANSFORMER, ["x", "n", "w"]), (COARSE, ["x", "n", "k", "w"])],
    ids=["configured", "coarse"],
)
def test_the_numeric_densities_move_by_at_most_their_declared_sensitivity(
    transformer, wide, monkeypatch
):
    """Every level of every wide column's hierarchical histogram, stacked: one row moves one
    cell of each level of each column where its value is in a value code (none at a point
    mass or missing, and a clipped extreme still lands in one cell). Under a coarse plan an
    integer column with a point mass (k) is cut into bins and measured too."""
    released = spy_on_releases(monkeypatch)
    assert transformer.wide_columns == wide
    worst, declared = 0.0, set()
    for seed in range(200):
        released.clear()
        for table in neighbours(seed):
            ledger, noise = PrivacyLedger(8.0, 1e-5, "rdp"), ZeroNoise()
            positions = transformer.positions(SCHEMA.conform(table))
            measure.numeric_densities(positions, ledger, 0.5, noise)
            declared.add(assert_noise_matches_the_ledger(noise, ledger))
        worst = max(worst, float(np.linalg.norm(released[1][1] - released[0][1])))
    (sensitivity,) = declared
    assert sensitivity == pytest.approx(math.sqrt(len(wide) * measure.DENSITY_LEVELS))
    assert worst <= sensitivity + SLACK
    assert worst == pytest.approx(sensitivity)  # a row in every column's values reaches it


def encoded_by(model: DPCGAN, frame: pd.DataFrame) -> np.ndarray:
    """``frame`` encoded by a fitted model's own transformer (its released bins)."""
    return model.transformer.encode(SCHEMA.conform(frame))


def coarse_codes(table: pd.DataFrame) -> np.ndarray:
    codes = TRANSFORMER.codes(encoded(table)[0])
    return measure.coarsen(codes, TRANSFORMER.coarse_maps(measure.PAIR_BINS))


COARSE_SIZES = table_sizes(TRANSFORMER.features, measure.PAIR_BINS)
PAIRS = [(0, 1), (0, 2), (1, 2)]


def test_the_pair_selection_utilities_move_by_at_most_one():
    """The exponential mechanism is run with utility sensitivity 1: each pair's L1 distance
    from the counts the earlier releases imply (fixed here, as they are given) moves by <= 1."""
    rng = np.random.default_rng(0)
    implied = [rng.uniform(0, 3, size=(COARSE_SIZES[i], COARSE_SIZES[j])) for i, j in PAIRS]
    worst = 0.0
    for seed in range(200):
        utilities = [
            measure.pair_utilities(coarse_codes(t), COARSE_SIZES, PAIRS, implied)
            for t in neighbours(seed)
        ]
        worst = max(worst, float(np.abs(utilities[1] - utilities[0]).max()))
    assert worst <= 1.0 + SLACK
    assert worst > 0.5  # the check has teeth


def test_the_pair_selection_charges_what_its_exponential_mechanisms_use(monkeypatch):
    used = []

    def spy(utilities, epsilon, sensitivity, rng):
        used.append((epsilon, sensitivity))
        return 0

    monkeypatch.setattr(measure, "exponential_mechanism", spy)
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    codes = coarse_codes(neighbours(0)[1])
    pairs = measure.select_pairs(
        codes,
        COARSE_SIZES,
        PAIRS,
        lambda i, j: np.zeros((COARSE_SIZES[i], COARSE_SIZES[j])),
        ledger,
        0.4,
        np.random.default_rng(0),
    )
    assert len(pairs) == len(PAIRS)  # a spanning tree, then the extra pair
    assert measure.forest_size(len(COARSE_SIZES), pairs[:2]) == 2
    assert len({frozenset(p) for p in pairs}) == len(pairs)
    (release,) = ledger.releases
    assert (release.kind, release.epsilon) == ("pure", 0.4)
    assert all(sensitivity == 1.0 for _, sensitivity in used)
    assert sum(epsilon for epsilon, _ in used) == pytest.approx(release.epsilon)


def test_the_pair_marginals_move_by_at_most_their_declared_sensitivity(monkeypatch):
    released = spy_on_releases(monkeypatch)
    worst, declared = 0.0, set()
    for seed in range(200):
        released.clear()
        for table in neighbours(seed):
            ledger, noise = PrivacyLedger(8.0, 1e-5, "rdp"), ZeroNoise()
            measure.pair_marginals(
                coarse_codes(table), PAIRS, COARSE_SIZES, 50.0, ledger, 0.3, noise
            )
            declared.add(assert_noise_matches_the_ledger(noise, ledger))
        worst = max(worst, float(np.linalg.norm(released[1][1] - released[0][1])))
    (sensitivity,) = declared
    assert sensitivity == pytest.approx(math.sqrt(len(PAIRS)))
    assert worst == pytest.approx(sensitivity)  # every added row reaches the bound


def test_the_adaptive_pairs_use_what_their_reserved_releases_declare(monkeypatch):
    """Chosen after training where the generator is furthest from the rows: each pick is an
    exponential mechanism with the reserved epsilon over the rounds and utility sensitivity 1
    (the utilities are pair_utilities, tested above), and the tables stacked move by at most
    their declared sensitivity, drawn with the declared noise, on neighbouring tables."""
    picks, drawn = [], []

    def first_open(utilities, epsilon, sensitivity, rng):
        picks.append((epsilon, sensitivity))
        return 0

    def spy(tables, std, rng):
        drawn.append((np.concatenate([t.ravel() for t in tables]), std))
        return [(t, std) for t in tables]

    monkeypatch.setattr(measure, "exponential_mechanism", first_open)
    monkeypatch.setattr(measure, "_noisy_tables", spy)
    candidates = list(itertools.combinations(range(len(COARSE_SIZES)), 2))
    expected = [np.zeros((COARSE_SIZES[i], COARSE_SIZES[j])) for i, j in candidates]
    worst = 0.0
    for seed in range(100):
        drawn.clear()
        for table in neighbours(seed):
            ledger = PrivacyLedger(8.0, 1e-5, "rdp")
            measure.reserve_adaptive_pairs(3, ledger, 0.3, 1.0)
            selection, tables = ledger.releases
            assert not selection.details["drawn"] and not tables.details["drawn"]
            chosen, _ = measure.adaptive_pairs(
                coarse_codes(table), COARSE_SIZES, candidates, expected, 3, 50.0, ledger, None
            )
            assert chosen == candidates[:3] and selection.details["drawn"]
            assert measure.reserved_rounds(ledger) == 0  # never again
            with pytest.raises(ValueError, match="reserved"):
                measure.adaptive_pairs(
                    coarse_codes(table), COARSE_SIZES, candidates, expected, 1, 50.0, ledger, None
                )
            sensitivity = tables.details["sensitivity"]
            assert drawn[-1][1] == pytest.approx(tables.noise_multiplier * sensitivity)
        worst = max(worst, float(np.linalg.norm(drawn[1][0] - drawn[0][0])))
    assert sensitivity == pytest.approx(math.sqrt(3))
    assert worst <= sensitivity + SLACK and worst == pytest.approx(sensitivity)
    assert len(picks) == 100 * 2 * 3
    assert all(e == pytest.approx(0.3 / 3) and sensitivity == 1.0 for e, sensitivity in picks)


@pytest.mark.parametrize("pool", [4, None])  # None: sampling's default pool, the choice's 4
def test_the_adaptive_utilities_compare_the_rows_with_a_sample_that_ignores_them(pool, monkeypatch):
    """What the adaptive picks score: the rows' coarse counts (one row moves them by one) and
    a sample of the trained sampler, which must not depend on the rows (else the utility's
    sensitivity would be 2). A fitted model draws on neighbouring tables' rows in turn."""
    monkeypatch.setattr(measure, "EXTRA_PAIRS", 0.0)  # leave pairs open for the picks
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 1.0)  # rake these few rows
    model = DPCGAN(
        epsilon=30.0,
        device="cpu",
        model=ModelConfig(
            latent_dim=8, generator_hidden=[16], discriminator_hidden=[16], sample_pool=pool
        ),
        train=TrainConfig(epochs=1, batch_size=64, progress=False),
    )
    table, neighbour = neighbours(3)
    rows = pd.concat([table] * 200, ignore_index=True)  # enough rows for every release
    model.fit(rows, "y", SCHEMA)
    seen = []
    monkeypatch.setattr(measure, "adaptive_pairs", lambda *args: seen.append(args) or ([], []))
    for frame in (pd.concat([table] * 200), pd.concat([neighbour, *[table] * 199])):
        again = copy.deepcopy(model)
        again.adaptive_drawn = False
        for name in (measure.ADAPTIVE_SELECTION, measure.ADAPTIVE_PAIRS):
            again.ledger.find(name).details["drawn"] = False
        adaptive.measure_where_wrong(again, encoded_by(again, frame), None)
    (
        (coarse_a, _, candidates_a, expected_a, *rest_a),
        (coarse_b, _, candidates_b, expected_b, *rest_b),
    ) = seen
    assert candidates_a == candidates_b and rest_a[:2] == rest_b[:2] and candidates_a
    for a, b in zip(expected_a, expected_b, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(coarse_b) == len(coarse_a) + 1


def test_release_marginals_selects_pairs_from_released_inputs_only(monkeypatch):
    """Through the real wiring: with the per-class tables and the row total fixed (they are
    released before the selection), both neighbours get the same candidates, every utility
    moves by at most 1, and the pair tables move by at most their declared sensitivity. A
    selection fed with exact counts instead of released ones would break this."""
    fixed: dict[str, list[np.ndarray]] = {}
    per_class = measure.marginals

    def released_once(*args):
        """The first neighbour's per-class tables, for both (the second's are drawn, unused)."""
        return fixed.setdefault("tables", per_class(*args))

    monkeypatch.setattr(measure, "marginals", released_once)
    utilities: list[list[np.ndarray]] = []

    def first_open_pair(scores, epsilon, sensitivity, rng):
        utilities[-1].append(np.asarray(scores, dtype=float))
        return 0  # the same pick for both neighbours: the picks after it stay comparable

    monkeypatch.setattr(measure, "exponential_mechanism", first_open_pair)
    picked: list[list[tuple[int, int]]] = []
    select = measure.select_pairs

    def record_pairs(*args):
        picked.append(select(*args))
        return picked[-1]

    monkeypatch.setattr(measure, "select_pairs", record_pairs)
    released = spy_on_releases(monkeypatch)
    worst = 0.0
    for seed in range(100):
        fixed.clear()
        released.clear()
        ledgers = []
        for table in neighbours(seed):
            utilities.append([])
            ledgers.append(PrivacyLedger(8.0, 1e-5, "rdp"))
            features, labels = encoded(table)
            measure.release_marginals(
                features,
                labels,
                TRANSFORMER,
                np.array([0.5, 0.5]),
                10_000.0,
                ledgers[-1],
                0.5,
                0.05,
                ZeroNoise(),
            )
        ours, theirs = utilities[-2], utilities[-1]
        assert [u.shape for u in ours] == [u.shape for u in theirs] != []  # same candidates
        assert picked[-2] == picked[-1]  # ... and the same pairs
        worst = max(
            worst, max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs, strict=True))
        )
        (first, second) = [stacked for name, stacked in released if name == "pair_marginals"]
        declared = ledgers[0].releases[-1].details["sensitivity"]
        assert ledgers[0].releases[-1].name == "pair_marginals"
        assert np.linalg.norm(second - first) <= declared + SLACK
    assert 0.5 < worst <= 1.0 + SLACK


def test_the_private_schema_queries_move_by_at_most_one_count_each():
    """Each of a column's counts (profile, bands, candidates, values) moves by at most one
    count in one cell between neighbouring columns: what sqrt((2 + VALUE_WEIGHT^2) x features
    + TARGET_WEIGHT^2) adds up, once weighed."""
    worst = 0.0
    for seed in range(200):
        table, bigger = neighbours(seed)
        for column in ("n", "c"):
            for query in (value_profile, magnitude_bands):
                a, b = (
                    query(t[column].astype(str).where(t[column].notna())) for t in (table, bigger)
                )
                moved = float(np.abs(b - a).sum())
                assert moved <= 1.0 + SLACK
                worst = max(worst, moved)
            a, b = (value_counts(t[column]) for t in (table, bigger))
            assert sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b)) <= 1
        counts = [candidate_counts(t["c"], ["a", "b", "c"]) for t in (table, bigger)]
        assert np.abs(counts[1] - counts[0]).sum() <= 1.0 + SLACK
    assert worst == pytest.approx(1.0)


def raw_rows(rng: np.random.Generator, n: int, classes: tuple[str, ...]) -> pd.DataFrame:
    """Raw CSV cells, as ``schema=private`` reads them (text): numbers with words, zeros and
    fractions, missing cells, rare and one-off levels, dates, and a target with a trailing-dot
    variant and missing cells."""

    def pick(values, p=None):
        return rng.choice(np.array(values, dtype=object), n, p=p)

    return pd.DataFrame(
        {
            "num": pick(["0", "1", "2.5", "17", "1e308", "-inf", "word", None]),
            "int": pick(["0", "3", "40", "41", None]),
            # A value most rows hold (left out of its bounds' tree), and decimals beside it.
            "spiky": pick(["45", "14.5", "30.25", "44.75", None], p=[0.8, 0.05, 0.05, 0.05, 0.05]),
            "cat": pick(["a", "b", "c", f"one-off-{rng.integers(10**6)}", None]),
            "mix": pick(["1", "two", "3", None]),
            # Dates in every format, an ambiguous one, epoch 0 (no band), and a non-date.
            "day": pick(
                [
                    "2020-01-02",
                    "03/04/2020",
                    "13/04/2020",
                    "1.2.2021",
                    "2020-01-02T10:00:00Z",
                    "1970-01-01",
                    "2020-13-45",
                    None,
                ]
            ),
            "y": pick([*classes, None], p=[*[0.95 / len(classes)] * len(classes), 0.05]),
        }
    )


class SchemaQueries:
    """The two Gaussian draws ``private_schema`` makes (dense counts, partition selection),
    replaced by a recorder of their noiseless input and noise std. Outputs are noiseless on a
    first run, then replayed on the neighbour, so both tables take the same branches and their
    queries pair up."""

    def __init__(self, monkeypatch, replay: SchemaQueries | None = None):
        self.calls: list[tuple[str, object, float]] = []
        self.thresholds: list[tuple[dict, float, float]] = []
        self.outputs: list[object] = []
        self.replay = replay
        # Looked up where they are called: release 1's draws in counts, release 2's in bounds.
        for module, names in (
            (schema_counts, ("noisy_tables", "gaussian_partitions")),
            (schema_bounds, ("noisy_tables",)),
        ):
            for name in names:
                monkeypatch.setattr(module, name, getattr(self, name))

    def _answer(self, noiseless: object) -> object:
        out = noiseless if self.replay is None else self.replay.outputs[len(self.outputs)]
        self.outputs.append(out)
        return out

    def noisy_tables(self, tables, std, rng):
        counts = np.concatenate([np.asarray(t, dtype=float).ravel() for t in tables])
        self.calls.append(("dense", counts, std))
        answer = self._answer(counts)
        return np.split(answer, np.cumsum([np.size(t) for t in tables])[:-1])

    def gaussian_partitions(self, counts, std, threshold, rng):
        self.calls.append(("sparse", dict(counts), std))
        self.thresholds.append((dict(counts), std, threshold))
        return self._answer({k: float(c) for k, c in counts.items() if c >= threshold})


def test_the_private_schema_moves_by_at_most_its_declared_sensitivity_per_release(
    monkeypatch,
):
    """Kinds, levels, bounds and classes: between neighbouring raw tables, all the counts one
    Gaussian release draws noise for (its dense counts and its partition-selection counts)
    move by at most its noise std / the ledger's noise multiplier in L2, and there are no
    more releases at that multiplier than the ledger's steps."""
    ratios = []
    conditioned = 0  # target-less tables that chose a column to condition on
    spiked = []  # the columns whose bounds' tree left a spike out, per call
    bounds = private_schema_module.numeric_bounds

    def spying(*args, **kwargs):
        spiked.append(sorted(args[6] if len(args) > 6 else kwargs.get("spikes") or {}))
        return bounds(*args, **kwargs)

    monkeypatch.setattr(private_schema_module, "numeric_bounds", spying)
    for seed in range(60):
        rng = np.random.default_rng(seed)
        # Every third table, the target's classes are counted as candidates (dense, weighed).
        target = {"y": ["yes", "no", "maybe", "p", "q"]} if seed % 3 == 2 else {}
        config = SchemaConfig(source="private", candidates={"int": ["0", "3", "40"], **target})
        # One-vs-rest around "yes" (with its "yes." variant), or two classes as they come.
        classes, positive = [(("yes", "yes.", "no", "maybe"), "yes"), (("p", "q"), None)][seed % 2]
        # Every fifth table names no target: the schema chooses one after its releases.
        named = "y" if seed % 5 != 4 else None
        dataset = DatasetConfig(name="t", file="", target=named, positive_label=positive)
        table = raw_rows(rng, int(rng.integers(300, 600)), classes)
        where = int(rng.integers(0, len(table) + 1))
        x = raw_rows(rng, 1, classes)
        if seed % 4 == 1:  # a class no other row holds: a new key of the (weighed) target
            x.loc[0, "y"] = f"new-{seed}"
        if seed % 4 == 3:  # a number in every numeric column: it moves every bounds' tree
            # (but the spiky one's where it is the spike, which its tree leaves out)
            spiky = "45" if seed % 8 == 3 else "30.25"
            x.loc[0, ["num", "int", "day", "spiky"]] = ["17", "41", "2020-01-02", spiky]
        bigger = pd.concat([table.iloc[:where], x, table.iloc[where:]], ignore_index=True)
        budget = SchemaBudget(float(rng.choice([20.0, 200.0])), 1e-3)
        first = SchemaQueries(monkeypatch)
        paid: list[Release] = []
        # (A table without a target may have no column to condition on: refused after its
        # releases, which must then still keep to their sensitivity. A named one never is.)
        refusals = (
            contextlib.suppress(UserInputError) if named is None else contextlib.nullcontext()
        )
        with refusals:
            _, release = private_schema_module.private_schema(
                table, dataset, config, budget, np.random.default_rng(0), paid.extend
            )
            conditioned += release.target is not None
        second = SchemaQueries(monkeypatch, replay=first)
        with refusals:
            private_schema_module.private_schema(
                bigger, dataset, config, budget, np.random.default_rng(0)
            )
        # Both releases drawn (release 1's dense counts, release 2's trees), refused or not.
        assert [kind for kind, *_ in first.calls].count("dense") == 2
        counts = paid[0]
        assert counts.kind == "gaussian" and counts.steps == 2
        moved: dict[float, float] = {}  # noise std -> squared L2 movement of its counts
        for (kind, a, std), (kind_b, b, std_b) in zip(first.calls, second.calls, strict=True):
            assert (kind, std) == (kind_b, std_b)
            if kind == "sparse":
                squared = sum((a.get(k, 0) - b.get(k, 0)) ** 2 for k in set(a) | set(b))
            else:
                squared = float(((b - a) ** 2).sum())
            moved[std] = moved.get(std, 0.0) + squared
        assert len(moved) <= counts.steps  # one std per release, each paid as one step
        # A key only the added row holds (count: what one row adds to it, 1 or the target's
        # weight) clears its threshold with at most the tail's share per key.
        tail = paid[1]
        for (a, std, threshold), (b, _, _) in zip(first.thresholds, second.thresholds, strict=True):
            for key in set(b) - set(a):
                share = norm.sf(threshold - b[key], scale=std)
                assert share <= tail.delta / tail.details["keys_per_row"] * (1 + 1e-9)
        for std, squared in moved.items():
            declared = std / counts.noise_multiplier
            assert math.sqrt(squared) <= declared + SLACK
            ratios.append(math.sqrt(squared) / declared)
    assert max(ratios) > 0.7  # an added row can come close to the bound: the check can fail
    assert conditioned > 0  # the target-less path ran to its end on some tables
    assert ["spiky"] in spiked  # a tree without its spike, on neighbouring tables too


class GenerousQueries(SchemaQueries):
    """As :class:`SchemaQueries`, but a first run's dense outputs are 50 above the truth, so
    candidate classes that hold no row are released too (what the noise can do)."""

    def _answer(self, noiseless: object) -> object:
        if self.replay is None and isinstance(noiseless, np.ndarray) and noiseless.ndim == 1:
            return super()._answer(noiseless + 50.0)
        return super()._answer(noiseless)


# (cells of the table, the row the neighbour adds, positive_label, target candidates)
ENDINGS = [
    (["yes", "yes."], "no", "yes", None),  # only spellings of the positive class released
    (["p", "q"], "r", "r", ["p", "q", "r"]),  # a candidate class released with no row
    (["p", "q"], "r", None, ["p", "q", "r"]),  # three released classes, no positive label
    (["p", "q"], None, None, None),  # a missing target
    (["p", "q", "rare"], "rare", None, None),  # a class too rare to be released
]


@pytest.mark.parametrize(("classes", "extra", "positive", "candidates"), ENDINGS)
def test_a_private_run_ends_the_same_way_on_neighbouring_tables(
    monkeypatch, tmp_path, classes, extra, positive, candidates
):
    """Through load_tables and the checks fit and resume make next (the split, the target's
    rows, every check after the schema): with
    the mechanisms' outputs fixed, neighbouring raw tables are refused with the same message,
    or both give the same schema and training rows that differ by at most the added row (the
    split is each row's own coin: tests/privacy/test_input_table.py)."""
    rng = np.random.default_rng(0)
    n = 400
    p = None if "rare" not in classes else [0.495, 0.495, 0.01]
    table = pd.DataFrame(
        {"num": rng.integers(0, 50, n).astype(str), "y": rng.choice(classes, n, p=p)}
    )
    bigger = pd.concat(
        [table, pd.DataFrame({"num": ["7"], "y": [extra]})], ignore_index=True
    ).sample(frac=1.0, random_state=1)  # the new row anywhere
    dataset = DatasetConfig(name="t", file="", target="y", positive_label=positive, sep=",")
    config = SchemaConfig(source="private")
    if candidates:
        config.candidates = {"y": candidates}
    endings = []
    first = None
    for name, frame in (("table", table), ("bigger", bigger)):
        dataset.path = str(tmp_path / f"{name}.csv")
        frame.to_csv(dataset.path, index=False)
        queries = GenerousQueries(monkeypatch, replay=first)
        first = first or queries
        try:
            train, _, release = load_tables(
                dataset, config, None, SchemaBudget(50.0, 1e-3), np.random.default_rng(0)
            )
        except UserInputError as exc:
            endings.append(("refused", str(exc), None))
            continue
        # What fit and resume check next must not refuse: δ = 0.01 is not below 1/n of these
        # ~320 rows, so a check that counted the rows kept (or their classes) would.
        fitting._conformed(train, "y", release.schema)
        rows = Counter(map(tuple, train.astype(str).to_numpy().tolist()))
        endings.append(("kept", rows, release.schema.to_specs()))
    (kind_a, a, specs_a), (kind_b, b, specs_b) = endings
    assert (kind_a, specs_a) == (kind_b, specs_b)
    if kind_a == "refused":
        assert a == b
    else:
        assert not a - b and sum((b - a).values()) <= 1
