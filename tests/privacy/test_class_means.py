"""Class profiles: the sensitivity bound, the release in the ledger, and the generator's match."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from rdpgan import DPCGAN
from rdpgan.config import ModelConfig, PrivacyConfig, TrainConfig
from rdpgan.data.schema import Schema
from rdpgan.errors import UserInputError
from rdpgan.models import Generator
from rdpgan.privacy import accountants, class_means
from rdpgan.privacy.ledger import recompute_epsilon
from rdpgan.privacy.randomness import SecretRandomness
from rdpgan.training import CGANTrainer
from rdpgan.transform import Span, TableTransformer

SCHEMA = [
    {"name": "x", "kind": "continuous", "lo": -5, "hi": 5},
    {"name": "n", "kind": "continuous", "lo": 0, "hi": 100, "point_masses": [0], "missing": True},
    {"name": "c", "kind": "categorical", "levels": ["a", "b", "c"], "missing": True},
    {"name": "y", "kind": "categorical", "levels": [0, 1]},
]


def table(n: int = 1000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.1).astype(int)
    n_values = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0, 100, n))
    n_values[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame(
        {
            "x": rng.normal(3 * y - 1, 1.0),
            "n": n_values,
            # the rare class is almost always "c": the feature a classifier needs
            "c": np.where(y == 1, "c", rng.choice(["a", "b", None], n)),
            "y": y,
        }
    )


def encoded(frame: pd.DataFrame) -> tuple[TableTransformer, np.ndarray, np.ndarray]:
    schema = Schema.from_specs(SCHEMA)
    transformer = TableTransformer(schema, "y")
    conformed = schema.conform(frame)
    return transformer, transformer.encode(conformed), transformer.encode_labels(conformed)


def test_every_encoded_row_is_within_the_sensitivity_bound():
    transformer, features, _ = encoded(table())
    norms = np.linalg.norm(features, axis=1)
    bound = class_means.sensitivity(transformer.spans)
    assert norms.max() <= bound + 1e-6
    # tight: a row with an extreme value and every block set reaches it
    assert bound == math.sqrt(len(transformer.spans)) and norms.max() > 0.9 * bound


def test_adding_a_row_moves_the_class_sums_by_at_most_the_sensitivity():
    transformer, features, labels = encoded(table())
    full = class_means.class_sums(features, labels, 2)
    bound = class_means.sensitivity(transformer.spans)
    for i in range(0, len(features), 97):
        without = class_means.class_sums(np.delete(features, i, 0), np.delete(labels, i), 2)
        assert np.linalg.norm(full - without) <= bound + 1e-9


def test_profiles_are_valid_rows_and_keep_strong_signals():
    transformer, features, labels = encoded(table())
    sums = class_means.class_sums(features, labels, 2)
    counts = np.bincount(labels, minlength=2)
    exact = class_means.profiles(sums, counts, transformer.spans)
    np.testing.assert_allclose(exact, sums / counts[:, None], atol=1e-9)  # no noise: no change
    rng = np.random.default_rng(0)
    noise = 8.0
    noisy = class_means.profiles(
        sums + rng.normal(0, noise, sums.shape), counts, transformer.spans, noise
    )
    for span in transformer.spans:
        block = noisy[:, span.start : span.end]
        if span.activation == "softmax":
            assert (block >= 0).all()
            np.testing.assert_allclose(block.sum(axis=1), 1.0)
        else:
            assert (np.abs(block) <= 1).all()
    c_index = transformer.spans[-1].start + 2  # level "c" of column c
    assert noisy[1, c_index] > 0.8 and noisy[0, c_index] < 0.1


def test_a_deviation_within_the_noise_falls_back_to_the_pooled_profile():
    spans = (Span(0, 2, "softmax"),)
    sums = np.array([[500.0, 500.0], [6.0, 4.0]])  # class 1: 10 rows, deviation 0.1
    counts = np.array([1000.0, 10.0])
    shrunk = class_means.profiles(sums, counts, spans, noise_std=20.0)
    pooled = sums.sum(0) / counts.sum()
    np.testing.assert_allclose(shrunk[1], pooled / pooled.sum())
    kept = class_means.profiles(sums, counts, spans, noise_std=0.01)
    np.testing.assert_allclose(kept[1], [0.6, 0.4], atol=1e-3)


def test_expected_rows_are_the_mean_of_sampled_rows():
    torch.manual_seed(0)
    transformer, _, _ = encoded(table(50))
    generator = Generator(4, 2, [16], transformer.spans, transformer.width).eval()
    z = torch.randn(1, 4).expand(40_000, 4)
    y = torch.nn.functional.one_hot(torch.ones(40_000, dtype=torch.long), 2).float()
    with torch.no_grad():
        expected = generator.expected_rows(z[:1], y[:1])[0]
        values, codes = generator.sample_parts(z, y)
    rows = transformer.encode(
        transformer.schema.conform(
            transformer.decode_parts(values.numpy(), codes.numpy(), np.ones(40_000, int))
        )
    )
    np.testing.assert_allclose(rows.mean(axis=0), expected.numpy(), atol=0.01)


def test_the_profile_loss_teaches_the_generator_the_class_profiles():
    torch.manual_seed(0)
    transformer, features, labels = encoded(table())
    sums = class_means.class_sums(features, labels, 2)
    targets = class_means.profiles(sums, np.bincount(labels), transformer.spans)
    generator = Generator(8, 2, [32], transformer.spans, transformer.width)
    trainer = CGANTrainer(
        generator,
        critic=None,  # type: ignore[arg-type]  # the profile loss does not use D
        generator_optimizer=torch.optim.Adam(generator.parameters(), lr=1e-2),
        features=torch.as_tensor(features),
        labels=torch.as_tensor(labels),
        label_probs=torch.tensor([0.9, 0.1]),
        secret=SecretRandomness(0),
        sample_rate=0.1,
        expected_batch=100,
        class_profiles=torch.as_tensor(targets, dtype=torch.float32),
        moment_weight=1.0,
    )
    before = float(trainer.profile_loss().detach())
    for _ in range(300):
        trainer.generator_optimizer.zero_grad()
        loss = trainer.profile_loss()
        loss.backward()
        trainer.generator_optimizer.step()
    assert float(trainer.profile_loss().detach()) < 0.05 * before


SMALL = dict(
    model=ModelConfig(
        latent_dim=8, generator_hidden=[32], discriminator_hidden=[32], moment_weight=1.0
    ),
    train=TrainConfig(epochs=3, batch_size=64, progress=False),
)


@pytest.mark.parametrize("accountant", ["rdp", "moments", "prv", "gdp"])
def test_the_release_is_paid_for_in_the_ledger(accountant):
    model = DPCGAN(
        epsilon=4.0,
        privacy=PrivacyConfig(name=accountant, accountant=accountant, class_means_fraction=0.5),
        device="cpu",
        **SMALL,
    )
    model.fit(table(), "y", SCHEMA, positive_label=1)
    ledger = model.ledger.to_dict()
    names = [m["name"] for m in ledger["mechanisms"]]
    assert names == ["label_counts", "class_means", "dp_sgd_discriminator"]
    release = ledger["mechanisms"][1]
    assert release["sample_rate"] == 1.0 and release["steps"] == 1
    assert release["sensitivity"] == pytest.approx(2.0)  # x, n and its mode block, c
    # calibrated so that the release alone costs the declared share of epsilon
    assert (
        release["epsilon_alone"] == pytest.approx(2.0, rel=0.02) and release["epsilon_alone"] <= 2.0
    )
    assert ledger["epsilon_spent"] <= 4.0
    assert ledger["end_to_end"] is accountants.is_upper_bound(accountant)  # gdp: CLT only
    assert recompute_epsilon(ledger) == pytest.approx(ledger["epsilon_spent"], rel=1e-9)


def test_a_larger_share_means_less_noise_on_the_profiles():
    sigmas = []
    for fraction in (0.2, 0.6):
        model = DPCGAN(
            epsilon=4.0, privacy=PrivacyConfig(class_means_fraction=fraction), device="cpu", **SMALL
        )
        model.fit(table(), "y", SCHEMA, positive_label=1)
        sigmas.append(model.ledger.releases[1].noise_multiplier)
    assert sigmas[1] < sigmas[0]


def test_profiles_survive_save_and_load(tmp_path):
    model = DPCGAN(epsilon=4.0, device="cpu", **SMALL).fit(table(), "y", SCHEMA, positive_label=1)
    model.save(tmp_path)
    again = DPCGAN.load(tmp_path, device="cpu")
    np.testing.assert_allclose(again.class_profiles, model.class_profiles, atol=1e-7)


def test_a_non_private_run_says_the_profiles_are_exact():
    model = DPCGAN(privacy=PrivacyConfig(name="none", accountant="none"), device="cpu", **SMALL)
    model.fit(table(), "y", SCHEMA, positive_label=1)
    assert any("class profiles used exactly" in note for note in model.ledger.notes)
    assert [r.name for r in model.ledger.releases] == []


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1])
def test_a_share_outside_zero_one_is_refused_before_any_data_is_read(fraction):
    with pytest.raises(UserInputError, match="class_means_fraction"):
        DPCGAN(privacy=PrivacyConfig(class_means_fraction=fraction), device="cpu", **SMALL)


@pytest.mark.parametrize(
    ("epsilon", "fraction", "release"), [(0.6, 0.9, "class_means"), (0.2, 0.5, "label_counts")]
)
def test_a_budget_split_that_cannot_be_met_is_a_one_line_user_error(epsilon, fraction, release):
    model = DPCGAN(
        epsilon=epsilon, privacy=PrivacyConfig(class_means_fraction=fraction), device="cpu", **SMALL
    )
    with pytest.raises(UserInputError, match=f"the {release} release would take epsilon past"):
        model.fit(table(), "y", SCHEMA, positive_label=1)
    assert model.ledger.epsilon() <= epsilon  # refused before it was recorded


def test_without_moment_weight_nothing_is_released():
    model = DPCGAN(
        epsilon=4.0,
        device="cpu",
        model=ModelConfig(
            latent_dim=8, generator_hidden=[32], discriminator_hidden=[32], moment_weight=0.0
        ),
        train=SMALL["train"],
    )
    model.fit(table(), "y", SCHEMA, positive_label=1)
    assert [r.name for r in model.ledger.releases] == ["label_counts", "dp_sgd_discriminator"]
    assert model.class_profiles is None
