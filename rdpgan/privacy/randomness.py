"""SecretRandomness: the one kind of source of every random draw a DP argument relies on.

Why one place: the guarantee of a release holds only while its randomness is unknown to the
adversary. Poisson masks (amplification by subsampling needs the batch to be secret), the
noise of every mechanism, and any random input of a per-sample term that enters a noisy sum
are all drawn here, never from ``seed`` (public: it is written in ``run.json``) or from a
global RNG that anything else touches. DP-SGD's noise, drawn on another thread, comes from a
second source of this kind with a key of its own (:meth:`SecretRandomness.independent`).

The source is NumPy's Philox-4x64-10 counter-based generator (built from a reduced-round
block cipher; not certified as a CSPRNG), whose 128-bit key and 256-bit starting counter are
drawn from the operating system's CSPRNG (:mod:`secrets`): fresh every run, never written to
any file (pickling is refused, so it cannot slip into a checkpoint; :attr:`numpy`, handed to
the mechanisms, must not be stored either). ``privacy.noise_seed`` keys it through a
``SeedSequence`` with a number instead, for tests and benchmarks; the ledger then marks the run
as not end-to-end private.
"""

from __future__ import annotations

import math
import secrets

import numpy as np
import torch

# Bits of OS entropy behind an unseeded source: Philox's whole key, and its starting counter.
KEY_BITS = 128
COUNTER_BITS = 256
# Keep a seeded run's uses of the source apart: fitting (and resuming) vs the private schema.
FIT_STREAM = 0
SCHEMA_STREAM = 1
# Under torchrun, rank r > 0 fits with (FIT_STREAM, first step, RANK_STREAM, r): no key of
# rank 0's (or of a spawned child of it) can equal it.
RANK_STREAM = 2
# DP-SGD's noise is drawn from a second source (:meth:`SecretRandomness.independent`), on
# another thread; seeded, keyed as the fit's with NOISE_STREAM in FIT_STREAM's place:
# (NOISE_STREAM, first step), or under torchrun (NOISE_STREAM, first step, RANK_STREAM, r).
NOISE_STREAM = 3
# Streams are 32-bit words: SeedSequence splits a larger number into words, so (0, 2**32 + 1)
# would key what (0, 1, 1) keys.
STREAM_LIMIT = 2**32
# Poisson masks compare a uniform integer in [0, 2**MASK_BITS) with rate * 2**MASK_BITS, so a
# rate that is a multiple of 2**-MASK_BITS (see exact_sample_rate) is realised exactly.
MASK_BITS = 53


def exact_sample_rate(rate: float) -> float:
    """``rate`` rounded down to a multiple of 2**-53: the rate the Poisson mask realises exactly,
    and so the one the ledger must charge."""
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"sample rate must be in (0, 1], got {rate}")
    exact = math.floor(rate * 2**MASK_BITS) / 2**MASK_BITS
    if exact <= 0.0:
        raise ValueError(f"sample rate {rate} is below 2**-{MASK_BITS}")
    return exact


class SecretRandomness:
    """A secret stream of random draws; ``streams`` keep a seeded run's uses apart."""

    def __init__(self, noise_seed: int | None = None, *streams: int):
        if noise_seed is None:
            key, counter = secrets.randbits(KEY_BITS), secrets.randbits(COUNTER_BITS)
            bits = np.random.Philox(key=key, counter=counter)
        else:
            if isinstance(noise_seed, bool) or int(noise_seed) != noise_seed or noise_seed < 0:
                raise ValueError(f"noise_seed must be a non-negative integer, got {noise_seed!r}")
            spawn_key = tuple(int(s) for s in streams)
            if not all(0 <= s < STREAM_LIMIT for s in spawn_key):
                raise ValueError(f"streams must be in [0, 2**32), got {spawn_key}")
            bits = np.random.Philox(np.random.SeedSequence(int(noise_seed), spawn_key=spawn_key))
        self.numpy = np.random.Generator(bits)
        self._seed, self._streams = noise_seed, streams

    def independent(self, stream: int) -> SecretRandomness:
        """A second source, for draws made on another thread: unseeded, fresh OS entropy; seeded,
        this source's seed and streams with ``stream`` in place of the first, so that neither
        source replays the other and a seeded run's draws do not depend on how its threads
        interleave."""
        if self._seed is None:
            return SecretRandomness()
        return SecretRandomness(self._seed, stream, *self._streams[1:])

    def __reduce__(self) -> tuple:  # never into a checkpoint, a pickle or a subprocess
        raise TypeError("SecretRandomness holds secret state and cannot be saved")

    def poisson_indices(self, n_rows: int, sample_rate: float) -> np.ndarray:
        """Rows of a Poisson sample: each row independently with probability ``sample_rate``,
        exactly (the rate must come from :func:`exact_sample_rate`). May be empty."""
        threshold = sample_rate * 2**MASK_BITS
        if threshold != int(threshold) or not 0 < threshold <= 2**MASK_BITS:
            raise ValueError(f"sample rate {sample_rate!r} is not a multiple of 2**-{MASK_BITS}")
        draws = self.numpy.integers(0, 2**MASK_BITS, size=n_rows, dtype=np.int64)
        return np.flatnonzero(draws < int(threshold))

    def gaussian_noise(self, reference: torch.Tensor, std: float) -> torch.Tensor:
        """N(0, std^2) noise shaped like ``reference``, on its device and dtype: one float64
        draw per coordinate (see the README on why Opacus's ``secure_mode`` sum is not used)."""
        if std == 0:
            return torch.zeros_like(reference)
        draws = self.numpy.normal(0.0, std, size=tuple(reference.shape))
        return torch.from_numpy(draws).to(device=reference.device, dtype=reference.dtype)

    def standard_normal(self, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """N(0, 1) draws, float32."""
        z = self.numpy.standard_normal(shape, dtype=np.float32)
        return torch.from_numpy(z).to(device)

    def open_uniform(self, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """Uniform draws in (0, 1), float32 (never exactly 0, so their log is finite)."""
        u = self.numpy.random(shape, dtype=np.float32)
        return torch.from_numpy(np.maximum(u, np.float32(2**-24))).to(device)

    def categorical(self, probs: np.ndarray, n: int) -> np.ndarray:
        """``n`` codes drawn from the distribution ``probs``."""
        return self.numpy.choice(len(probs), size=n, p=probs)
