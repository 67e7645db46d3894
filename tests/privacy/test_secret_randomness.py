"""The randomness DP relies on is secret: keyed by >= 128 bits of OS entropy, untouched by
``seed`` and by the global RNGs, never written into a run directory.

Amplification by subsampling holds only while the Poisson batches are unknown; the Gaussian
mechanism only while its noise is. Each test here would have caught a way this project once
broke that: batches drawn from the global torch RNG after ``torch.manual_seed(seed)``, noise
from a torch generator seeded with 32 bits, ``privacy.noise_seed`` written into run.json.
"""

from __future__ import annotations

import pickle
import random
import secrets

import numpy as np
import pandas as pd
import pytest
import torch

from rdpgan import DPCGAN, training
from rdpgan.config import ModelConfig, PrivacyConfig, TrainConfig
from rdpgan.models import Discriminator
from rdpgan.privacy import randomness
from rdpgan.privacy.randomness import MASK_BITS, SecretRandomness, exact_sample_rate
from tests.conftest import FAST, train_cli

SCHEMA = [
    {"name": "x", "kind": "continuous", "lo": -5, "hi": 5},
    {"name": "y", "kind": "categorical", "levels": [0, 1]},
]
SMALL = dict(
    model=ModelConfig(latent_dim=4, generator_hidden=[8], discriminator_hidden=[8]),
    # The rate is capped at max_sample_rate, so it does not follow the noisy row count: only
    # the secret source can make two fits' batches differ.
    train=TrainConfig(steps=5, batch_size=10**6, max_sample_rate=0.1, progress=False),
)


def table(n: int = 400):
    import pandas as pd

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, n)
    return pd.DataFrame({"x": rng.normal(2 * y - 1, 1.0), "y": y})


def draws(source: SecretRandomness) -> tuple[np.ndarray, np.ndarray]:
    noise = source.gaussian_noise(torch.zeros(20, dtype=torch.float64), 1.0).numpy()
    return source.poisson_indices(1000, exact_sample_rate(0.3)), noise


def test_global_rngs_do_not_determine_the_secret_draws():
    drawn = []
    for _ in range(2):
        torch.manual_seed(0)
        np.random.seed(0)
        drawn.append(draws(SecretRandomness()))
    assert not np.array_equal(drawn[0][0], drawn[1][0])
    assert not np.array_equal(drawn[0][1], drawn[1][1])


def test_the_key_has_at_least_128_bits_of_os_entropy(monkeypatch):
    asked = []

    def spy(bits: int) -> int:
        asked.append(bits)
        return secrets.SystemRandom().getrandbits(bits)

    monkeypatch.setattr(randomness.secrets, "randbits", spy)
    sources = [SecretRandomness() for _ in range(2)]
    assert asked and min(asked) >= 128
    # What the generator holds: a 128-bit key (both 64-bit words drawn) and a random counter,
    # different in every source (a torch CPU generator keeps at most 64 bits of its seed,
    # MT19937 seeded the old way kept 32).
    states = [source.numpy.bit_generator.state["state"] for source in sources]
    for part in ("key", "counter"):
        assert not np.array_equal(states[0][part], states[1][part])
    assert all((state["key"] != 0).all() for state in states)


def test_an_independent_source_has_its_own_os_key_or_its_own_seeded_stream(monkeypatch):
    """DP-SGD's noise comes from a second source drawn on another thread: unseeded, keyed by
    fresh OS entropy of its own (as any source); seeded, by a stream no other source has."""
    asked = []

    def spy(bits: int) -> int:
        asked.append(bits)
        return secrets.SystemRandom().getrandbits(bits)

    monkeypatch.setattr(randomness.secrets, "randbits", spy)
    parent = SecretRandomness()
    before = len(asked)
    child = parent.independent(randomness.NOISE_STREAM)
    assert asked[before:] == asked[:before] and min(asked) >= 128  # a key and counter of its own
    states = [source.numpy.bit_generator.state["state"] for source in (parent, child)]
    assert not np.array_equal(states[0]["key"], states[1]["key"])
    for streams in [(randomness.FIT_STREAM, 5), (randomness.FIT_STREAM, 5, RANK, 1)]:
        noise = SecretRandomness(7, *streams).independent(randomness.NOISE_STREAM)
        same = SecretRandomness(7, randomness.NOISE_STREAM, *streams[1:])
        np.testing.assert_array_equal(draws(noise)[1], draws(same)[1])


RANK = randomness.RANK_STREAM


def test_every_key_a_seeded_run_uses_draws_apart():
    """The schema's, the fit's and its noise's, from each first step, on each rank: no two
    keys a seeded run can use give the same stream (a spawned child of one included)."""
    fit, noise = randomness.FIT_STREAM, randomness.NOISE_STREAM
    keys = [(randomness.SCHEMA_STREAM,)]
    for step in (1, 2, 3, 401):
        for rank in ((), (RANK, 1), (RANK, 2)):
            keys += [(fit, step, *rank), (noise, step, *rank)]
    seen = {}
    for key in keys:
        sequence = np.random.SeedSequence(7, spawn_key=key)
        for name, state in [
            (key, sequence),
            *(((*key, i), c) for i, c in enumerate(sequence.spawn(4))),
        ]:
            words = tuple(state.generate_state(4))
            assert words not in seen, f"{name} draws what {seen[words]} draws"
            seen[words] = name
    with pytest.raises(ValueError):
        SecretRandomness(7, fit, 2**32 + 1)


def test_the_secret_source_cannot_be_saved():
    source = SecretRandomness()
    with pytest.raises(TypeError):
        pickle.dumps(source)
    with pytest.raises(TypeError):
        torch.save({"rng": source}, "/dev/null")


def test_poisson_masks_realise_exactly_the_charged_rate():
    rate = exact_sample_rate(0.019194)
    assert rate <= 0.019194 < rate + 2.0**-MASK_BITS
    assert (rate * 2**MASK_BITS).is_integer()
    with pytest.raises(ValueError):  # a rate the mask would only approximate is refused
        SecretRandomness(0).poisson_indices(10, 0.019194)
    source = SecretRandomness(0)
    sizes = [len(source.poisson_indices(1000, exact_sample_rate(0.05))) for _ in range(400)]
    assert len(set(sizes)) > 10 and abs(np.mean(sizes) - 50) < 3  # random size, right mean
    assert len(source.poisson_indices(10, exact_sample_rate(1.0))) == 10
    assert any(len(source.poisson_indices(20, exact_sample_rate(0.01))) == 0 for _ in range(50))


# Categorical features only: their encoding is public (the schema's levels), so two fits hand
# D the same feature rows, and equal batches mean equal masks. A numeric column's bins follow
# the released (noisy) densities: every fit encodes its rows differently, and batches drawn
# with the same mask would still look different.
PUBLIC_ENCODING = [
    {"name": "x", "kind": "categorical", "levels": list(range(40))},
    {"name": "y", "kind": "categorical", "levels": [0, 1]},
]


def public_table(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"x": rng.integers(0, 40, n), "y": rng.integers(0, 2, n)})


def pairs_seen_by_the_critic(monkeypatch, **settings) -> list[np.ndarray]:
    """Fit once from fixed global RNGs; return the (real, fake) pairs of each private
    discriminator step, [B, 2, F].

    Both fits start from the same torch, numpy and ``random`` states, and G's half of a step
    runs on the main thread (in step order): a draw taken from a global stream instead of the
    secret source would repeat in every fit, not differ by the order threads ran in.
    """
    seen: list[np.ndarray] = []
    forward = Discriminator.forward

    def spy(self, x, y):
        if x.dim() == 3:
            seen.append(x.detach().numpy().copy())
        return forward(self, x, y)

    monkeypatch.setattr(Discriminator, "forward", spy)
    monkeypatch.setattr(training, "_spare_core", lambda: False)
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    DPCGAN(epsilon=4.0, device="cpu", **SMALL, **settings).fit(public_table(), "y", PUBLIC_ENCODING)
    monkeypatch.setattr(Discriminator, "forward", forward)
    return seen


def real_rows(pairs: list[np.ndarray]) -> list[np.ndarray]:
    return [step[:, 0] for step in pairs]


def fakes(pairs: list[np.ndarray]) -> list[np.ndarray]:
    return [step[:, 1] for step in pairs]


def same_batches(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    if len(a) != len(b):
        return False
    return all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def no_step_alike(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """Whether every step's batch differs between two fits (one shared step would be a draw
    both fits took from the same stream)."""
    return len(a) == len(b) and not any(same_batches([x], [y]) for x, y in zip(a, b, strict=True))


def test_two_fits_with_the_same_seed_draw_different_batches(monkeypatch):
    first = pairs_seen_by_the_critic(monkeypatch, seed=3)
    second = pairs_seen_by_the_critic(monkeypatch, seed=3)
    assert len(first) == 5 and no_step_alike(real_rows(first), real_rows(second))
    # The comparison can see equal masks: one key, one set of batches.
    seeded = PrivacyConfig(noise_seed=7)
    again = [pairs_seen_by_the_critic(monkeypatch, seed=3, privacy=seeded) for _ in range(2)]
    assert same_batches(*again)


def test_two_fits_with_the_same_seed_draw_different_fakes(monkeypatch):
    """With the batches held fixed (every 10th row), D's first step pairs them with fakes of
    the same G (initialised from ``seed``): only the secret source can make them differ."""

    def every_tenth(self, n_rows: int, sample_rate: float) -> np.ndarray:
        return np.arange(0, n_rows, 10)

    monkeypatch.setattr(SecretRandomness, "poisson_indices", every_tenth)
    first = pairs_seen_by_the_critic(monkeypatch, seed=3)
    second = pairs_seen_by_the_critic(monkeypatch, seed=3)
    assert len(first) == 5 and same_batches(real_rows(first), real_rows(second))
    assert no_step_alike(fakes(first), fakes(second))


def test_noise_seed_makes_batches_reproducible_and_is_the_only_key(monkeypatch):
    seeded = PrivacyConfig(noise_seed=7)
    first = real_rows(pairs_seen_by_the_critic(monkeypatch, seed=3, privacy=seeded))
    # seed plays no part
    again = real_rows(pairs_seen_by_the_critic(monkeypatch, seed=4, privacy=seeded))
    other = PrivacyConfig(noise_seed=8)
    other_rows = real_rows(pairs_seen_by_the_critic(monkeypatch, seed=3, privacy=other))
    assert same_batches(first, again) and not same_batches(first, other_rows)


def test_the_ledger_charges_the_rate_the_mask_realises(monkeypatch):
    used = []
    indices = SecretRandomness.poisson_indices

    def spy(self, n_rows: int, sample_rate: float) -> np.ndarray:
        used.append(sample_rate)
        return indices(self, n_rows, sample_rate)

    monkeypatch.setattr(SecretRandomness, "poisson_indices", spy)
    train = TrainConfig(steps=5, batch_size=37, progress=False)  # not a round rate
    model = DPCGAN(epsilon=4.0, device="cpu", model=SMALL["model"], train=train)
    model.fit(table(), "y", SCHEMA)
    dp_sgd = model.ledger.to_dict()["mechanisms"][-1]
    assert used == [dp_sgd["sample_rate"]] * 5
    assert (dp_sgd["sample_rate"] * 2**MASK_BITS).is_integer()


@pytest.mark.parametrize("noise_seed", [None, 987654321])
def test_no_file_in_a_run_directory_holds_the_noise_seed(tmp_path, small_adult, noise_seed):
    extra = [] if noise_seed is None else [f"privacy.noise_seed={noise_seed}"]
    result = train_cli(tmp_path, "epsilon=3", "train.steps=30", *FAST, *extra, root=small_adult)
    assert result.returncode == 0, result.stderr
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert any(p.name == "privacy.json" for p in files)
    for path in files:
        content = path.read_bytes()
        assert b"noise_seed" not in content, path
        if noise_seed is not None:
            assert str(noise_seed).encode() not in content, path
    ledger = (tmp_path / "run" / "privacy.json").read_text()
    assert ('"end_to_end": true' in ledger) is (noise_seed is None)
