"""The randomness DP relies on is secret: keyed by >= 128 bits of OS entropy, untouched by
``seed`` and by the global RNGs, never written into a run directory.

Amplification by subsampling holds only while the Poisson batches are unknown; the Gaussian
mechanism only while its noise is. Each test here would have caught a way this project once
broke that: batches drawn from the global torch RNG after ``torch.manual_seed(seed)``, noise
from a torch generator seeded with 32 bits, ``privacy.noise_seed`` written into run.json.
"""

from __future__ import annotations

import pickle
import secrets

import numpy as np
import pytest
import torch

from rdpgan import DPCGAN
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


def real_rows_seen_by_the_critic(monkeypatch, **settings) -> list[np.ndarray]:
    """Fit once; return the real rows of each private discriminator step (pairs are [B, 2, F])."""
    seen: list[np.ndarray] = []
    forward = Discriminator.forward

    def spy(self, x, y):
        if x.dim() == 3:
            seen.append(x[:, 0].detach().numpy().copy())
        return forward(self, x, y)

    monkeypatch.setattr(Discriminator, "forward", spy)
    DPCGAN(epsilon=4.0, device="cpu", **SMALL, **settings).fit(table(), "y", SCHEMA)
    monkeypatch.setattr(Discriminator, "forward", forward)
    return seen


def same_batches(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    if len(a) != len(b):
        return False
    return all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_two_fits_with_the_same_seed_draw_different_batches(monkeypatch):
    first = real_rows_seen_by_the_critic(monkeypatch, seed=3)
    second = real_rows_seen_by_the_critic(monkeypatch, seed=3)
    assert len(first) == 5 and not same_batches(first, second)


def test_noise_seed_makes_batches_reproducible_and_is_the_only_key(monkeypatch):
    seeded = PrivacyConfig(noise_seed=7)
    first = real_rows_seen_by_the_critic(monkeypatch, seed=3, privacy=seeded)
    again = real_rows_seen_by_the_critic(monkeypatch, seed=4, privacy=seeded)  # seed plays no part
    other = real_rows_seen_by_the_critic(monkeypatch, seed=3, privacy=PrivacyConfig(noise_seed=8))
    assert same_batches(first, again) and not same_batches(first, other)


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
