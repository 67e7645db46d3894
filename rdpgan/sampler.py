"""Sampling from a fitted model: the generator, the transformer that decodes its codes, the
released statistics it samples labels from and is tilted and raked toward, and the tilts.

All of it is post-processing of releases (sampling spends no privacy), and none of it needs
the DP machinery or torch: a saved model is loaded (:mod:`rdpgan.fitted`) and sampled with
numpy and, for large calls, a few compiled loops (:mod:`rdpgan.frozen`, :mod:`rdpgan.loops`),
its random draws from numpy's generator seeded by the call's ``seed``.
"""

from __future__ import annotations

import itertools
import numbers
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
from threadpoolctl import threadpool_limits

from rdpgan import conditions as conditions_module
from rdpgan import numpy_kernels, postprocess, selfcheck
from rdpgan.config import ModelConfig
from rdpgan.deferred import DeferredModule
from rdpgan.errors import UserInputError
from rdpgan.frozen import FrozenGenerator
from rdpgan.loops import for_rows
from rdpgan.marginals import Marginals
from rdpgan.threads import usable_cores
from rdpgan.transform import TableTransformer

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = DeferredModule("pandas")

T = TypeVar("T")
R = TypeVar("R")

# Rows per generator pass when sampling: each pass's arrays (rows × ~700 floats) then stay near
# the cache. With numpy's passes (to 7ba724d), passes of 2k and 4k rows ran alike on 2 CPU
# workers (within 5%), 16k a fifth slower. With the compiled loops (rdpgan.kernels), the part
# of results/speed.md made at 61a5df6 (committed in 59c753c) timed passes of 2k 4% faster than
# 4k (13,425 against 12,887 raked rows/s, on the AVX2-capped EPYC); the parts made since, at
# 2k, time 1k and 4k beside it (at 001d8eb: 14,918 and 14,600 against 14,922). G's products
# alone ran alike at 1k, 2k and 4k rows (within 4%, ad hoc).
SAMPLE_CHUNK = 2_048
# Generated rows held at once when raking: output rows are raked in blocks of RAKING_ROWS //
# sample_pool (16,384 at a pool of 32), each matched to the released marginals on its own, so
# memory does not grow with the pool (nor with n).
RAKING_ROWS = 524_288
# With model.sample_pool null, sampling rakes a pool of RAKING_POOL generated rows per row kept
# where the noise std on one released count of the marginals (the most over their releases) is
# at most RAKING_NOISE_LIMIT of the released row count, and keeps every generated row where it
# is larger: matching noisier tables fits their noise. On Adult's validation split (round 15
# of results/tuning_adult.csv), raking cut 2-/3-way TVD by a fifth at ε=8 (noise 5.3e-4 of the
# rows) for ~0.003 of AUROC, and cost AUROC and 1-/2-way TVD at ε=3 (1.3e-3) and ε=1 (3.6e-3);
# the limit sits between (about their geometric mean). The pool was 4 from round 15 to round
# 28, which compared larger pools on Adult at ε=8 (3 seeds; the pairs chosen after training
# chosen at a pool of 4 in each, rdpgan.adaptive.CHOICE_POOL): quantile 2-/3-way TVD 0.048/0.067
# at 4, 0.041/0.057 at 16, 0.040/0.055 at 32, 0.041/0.055 at 64, AUROC level (0.862-0.864) and
# at most 0.01% repeated rows (0.03% at 4); 32 costs ~3 s more of a run on Adult's 26k rows
# (its final sample), and sampling where a run rakes generates 32 rows per row kept.
RAKING_POOL = 32
RAKING_NOISE_LIMIT = 8e-4
# A call for many more rows than the table matches them from fewer generated rows each: the
# matching takes at most RAKING_POOL x the released rows (at least CHOICE_ROWS) generated rows
# beyond the call's own, down to LARGE_CALL_POOL per row raked and 1 per row herded (herding
# picks rows one by one: slow), where a chosen pool would make a million rows cost 32 million.
# A large call's own sampling noise is small: on TV16 at eps 8 (issue 52's zero-config model,
# 200,000 rows, quantile 1-/2-way TVD against its train rows) a pool of 4 gave 0.0030/0.0766
# in 4.7 s, 2 gave 0.0030/0.0854 in 2.2 s, none (tilt alone) 0.0045/0.0820 in 1.8 s, and
# herding from 4, 0.0043 1-way in 19 s.
LARGE_CALL_POOL = 4
# With model.herding_pool null, sampling that does not rake generates HERDING_POOL rows per
# row kept and herds them (rdpgan.postprocess.herd), HERDING_ROWS output rows at a time: the
# kept rows follow G's own distribution of each column within each class to about a row per
# cell, where rows kept one by one as drawn scatter around it. Round 33
# (results/tuning_sampling.csv: pools of 1, 4, 8 and 16 on the same trained generators,
# validation splits only) found the mean quantile 1-/2-/3-way TVD lower at every pool on every
# table (Adult's 700-row subset at ε=8, 18 seeds: 0.056/0.156/0.191 kept as drawn,
# 0.045/0.145/0.178 at 16; acs12: 0.040/0.099/0.145 -> 0.030/0.086/0.129) and, at 16, AUROC
# level or better (Adult's 700 rows +0.014, standard error 0.009); 16 was best or within 0.003
# of the best pool's TVD and 0.005 of its AUROC on every table.
HERDING_POOL = 16
HERDING_ROWS = 2_048
# Herding follows every pair of feature columns too (herded_pairs), from a pool of
# HERDING_PAIRS_POOL rows per row kept, with model.herding_pairs true, or (null) on tables of
# at most HERDING_PAIR_COLUMNS feature columns in calls for at most HERDING_PAIR_ROWS rows.
# Rounds 34-35 (results/tuning_sampling.csv, validation splits, the same generators sampled
# every way): the pairs with a numeric column from a pool of 32 lowered quantile 2-way TVD on
# every table against columns alone (acs12 -0.0039 over 8 seeds, credit_data -0.0058,
# creditcard_aer -0.0082, Adult's 700-row subsets -0.0036), 1-way level, AUROC level on the
# development suite and 0.017 lower on Adult's subsets (standard error 0.006); every pair from
# a pool of 64 lowered 2-way TVD further on acs12 (-0.0013, 8 seeds), creditcard_aer (-0.0018,
# +-0.0012: within noise) and Adult's subsets (-0.0024), credit_data level (+0.0002), AUROC
# level within its noise. It costs: the pairs grow with the columns squared and herding slows
# several times over (Adult's 700-row subsets, sample_seconds: in round 34 the numeric pairs
# from 32 took 0.92 s against 0.30 s for columns alone; in round 35 every pair from 64 took
# 2.06 s against the numeric pairs' 1.22 s), so wide tables and large calls herd columns
# alone (a call's scatter, which herding removes, shrinks as its rows grow), and a pool's
# tables stay within HERDING_CELLS cells (memory; a pool keeps at least HERDING_MIN rows
# whatever its cells). Since pools are cut by cells, an explicit herding_pool far above the
# default, or a table of hundreds of columns, herds in smaller pools than before pairs (other
# rows for a seed).
HERDING_PAIRS_POOL = 64
HERDING_PAIR_COLUMNS = 16
HERDING_PAIR_ROWS = 4_096
HERDING_CELLS = 2**23
# Calls for fewer rows keep every generated row: herding's first picks are the pool's most
# common rows, so a handful of rows herded on their own would over-represent them. A call's
# rows are herded in pools of near-equal size (no small last pool), what each pool's picks
# fall short by carried to the next (rdpgan.postprocess.Herder).
HERDING_MIN = 256
# With model.tilt_sampling null, sampling is tilted where the noise std on one released count
# of the marginals is at most TILT_NOISE_LIMIT of the released row count (the public quantity
# raking's rule reads). Derived from Adult's validation rounds alone by
# scripts/tuning/derive_tilt_limit.py (results/tilt_limit.md): the tilt lowered mean TVD up to a
# share of 3.6e-3 (ε=1) and not from 5.1e-3 (2,000 rows at ε=8); the limit is their geometric mean.
TILT_NOISE_LIMIT = 4.3e-3
# Latent draws per class that sampling's tilt is fitted on (rdpgan.postprocess.class_tilts):
# its residual error on a column's expected distribution is of order 1/sqrt(rows) of a
# code's spread over z, below the noise of the released marginals on Adult.
TILT_ROWS = 8_192
# Held while tasks run on several threads under a one-thread BLAS limit (on_threads: a
# process-wide setting, two such limits at once would restore each other out of order).
_BLAS_LIMIT = threading.Lock()
# The tilt's latent draws come from SeedSequence([model seed, TILT_STREAM]): fixed by the
# model, apart from every sampling call's own stream.
TILT_STREAM = 0x7117
# Rows sampled each way (raked, not) to choose between them, from a stream of their own: about
# 4 s once per model on Adult (2 cores), kept in model.json.
CHOICE_ROWS = 8_192
CHOICE_STREAM = 0xC401


def spare_workers() -> int:
    """Threads one sampling call can generate with when nothing else runs (at the end of a
    training run): one per core, at most two (what the runs were timed on)."""
    return min(2, usable_cores())


def on_threads(task: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """``task`` of each of ``items`` on ``workers`` threads, every product on one BLAS thread
    (so that the results do not depend on ``workers``). BLAS's thread count is the process's:
    one such limit at a time (concurrent calls queue). A task's error is raised; after it (or
    Ctrl-C), the items not yet started are dropped, and those running are waited for."""
    with _BLAS_LIMIT, threadpool_limits(1, user_api="blas"):
        executor = ThreadPoolExecutor(workers)
        try:
            return list(executor.map(task, items))
        finally:
            executor.shutdown(cancel_futures=True)


def herded_pairs(transformer: TableTransformer) -> list[tuple[int, int]]:
    """The pairs of feature columns (indices into the codes) that herding follows: every
    pair."""
    return list(itertools.combinations(range(len(transformer.code_sizes)), 2))


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


def check_rows(n: object) -> None:
    if not isinstance(n, (int, np.integer)) or n <= 0:
        raise UserInputError(f"the number of rows to sample must be a positive integer, got {n}")


def check_workers(workers: int) -> None:
    """A whole number of threads from 1, checked before any work."""
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise UserInputError(f"workers must be a positive integer, got {workers!r}")


def check_seed(name: str, seed: int) -> None:
    """A whole number from 0 (what numpy's generators take): a model's seed is checked when the
    model is made, before anything is spent; a sampling call's, before any work."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise UserInputError(f"{name} must be a non-negative integer, got {seed!r}")


def raking_pool(
    config: ModelConfig, marginals: Marginals | None, noise: float, released_rows: int
) -> int:
    """Generated rows per sampled row: ``model.sample_pool``, or (null) ``RAKING_POOL`` where
    the released marginals are precise enough to match (``noise``, the std on one released
    count, at most RAKING_NOISE_LIMIT of the released rows), else 1 (no raking). Public: a fit
    decides with it, before training, whether to measure pairs for raking."""
    if marginals is None:
        return 1
    return pool_for_noise(config, noise, released_rows)


def matched_rows(released_rows: int) -> int:
    """The most generated rows a call's matching takes beyond its own (LARGE_CALL_POOL)."""
    return RAKING_POOL * max(released_rows, CHOICE_ROWS)


def herding_block(n: int, pool: int, tables: int) -> int:
    """Output rows per herded pool for a call of ``n`` rows: near-equal pools, each at most
    RAKING_ROWS generated rows (memory, as raking) and HERDING_CELLS cells over its
    ``tables``."""
    rows = max(HERDING_MIN, min(RAKING_ROWS, HERDING_CELLS // max(tables, 1)) // pool)
    pools = -(-n // min(HERDING_ROWS, rows))
    return -(-n // pools)


def pool_for_noise(config: ModelConfig, noise: float, released_rows: int) -> int:
    """:func:`raking_pool` for marginals whose noise is ``noise``: known before they are
    released, so that a fit can plan its budget split with it."""
    if config.sample_pool is not None:
        return config.sample_pool
    return RAKING_POOL if noise <= RAKING_NOISE_LIMIT * released_rows else 1


class Tilts:
    """Sampling's tilts, fitted at the first sample after training or loading (concurrent
    sampling threads wait for one fit), and the raking pool chosen by the self-check; a copy
    starts empty."""

    def __init__(self) -> None:
        self.fitted: list[list[np.ndarray]] | None = None
        self.pool: int | None = None
        self.lock = threading.Lock()

    def clear(self) -> None:
        """For new weights or new releases: both were chosen for the ones they saw."""
        with self.lock:
            self.fitted = None
            self.pool = None

    def __reduce__(self) -> tuple[type[Tilts], tuple[()]]:
        return (Tilts, ())  # a copy (any pickle protocol, copy, deepcopy) starts empty


@dataclass
class Sampler:
    """A fitted generator with the released statistics it samples from (all public)."""

    generator: FrozenGenerator
    transformer: TableTransformer
    label_probs: np.ndarray
    released_rows: int
    marginals: Marginals | None
    marginal_noise: float  # the noise std on one released count of the marginals
    config: ModelConfig  # reads sample_pool, herding_pool, herding_pairs and tilt_sampling
    seed: int
    tilts: Tilts = field(default_factory=Tilts)

    def sample(
        self,
        n: int | None = None,
        label: Any = None,
        seed: int | None = None,
        workers: int = 1,
        conditions: Mapping[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Draw ``n`` synthetic rows (default: the released size of the training table).

        ``label`` fixes the condition to one class; otherwise labels follow the released
        (noisy) label frequencies. ``conditions`` ({column: level, or number, or (low, high)})
        keeps only rows that meet them (:mod:`rdpgan.conditions`; the target's by the
        generator's own conditioning). ``workers`` threads generate them: from 2 on, the rows
        do not depend on it (every product on one BLAS thread); with 1, the products run on
        BLAS's threads as the process has them, which can round otherwise in the last bit and
        move a draw now and then (files, :mod:`rdpgan.sample`, never do).
        """
        if not conditions:
            return self.transformer.decode_parts(*self.parts(n, label, seed, workers))
        target = self.transformer.target
        wanted, tests = conditions_module.parse(conditions, self.transformer.schema, target)
        if wanted is not None:
            if label is not None and str(label) != str(wanted):
                raise UserInputError(f"label {label!r} and the condition on {target!r} differ")
            label = wanted
        n = self.released_rows if n is None else n
        check_rows(n)
        seed = self.seed if seed is None else seed
        if not tests:
            return self.sample(n, label, seed, workers)

        def generate(rows: int, batch_seed: int) -> pd.DataFrame:
            return self.transformer.decode_parts(*self.parts(rows, label, batch_seed, workers))

        return conditions_module.sample_where(generate, n, tests, seed, repr(dict(conditions)))

    def sample_arrow(
        self,
        n: int | None = None,
        label: Any = None,
        seed: int | None = None,
        workers: int = 1,
        call: int | None = None,
    ) -> pa.Table:
        """:meth:`sample`'s rows as an Arrow table (what files of millions of rows are written
        from, without a Python object per string); ``call``: see :meth:`parts`."""
        return self.transformer.decode_arrow(*self.parts(n, label, seed, workers, call=call))

    def parts(
        self,
        n: int | None,
        label: Any,
        seed: int | None,
        workers: int = 1,
        pool: int | None = None,
        call: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(within-bin positions, codes, label codes) of ``n`` sampled rows, generated by
        ``workers`` threads, ``pool`` generated rows raked per row kept (default: the pool
        :meth:`chosen_pool` chose, for a call of ``call`` rows: :meth:`call_pool`; a file's
        chunks are one call); unraked (a pool of 1), :meth:`herding_pool` generated rows
        herded per row kept, from HERDING_MIN rows. The call's generated rows choose its
        loops (:mod:`rdpgan.loops`)."""
        if n is None:
            # The released (noisy) total: the output size does not reveal the exact row count.
            n = self.released_rows
        check_rows(n)
        seed = self.seed if seed is None else seed
        check_seed("the sampling seed", seed)
        check_workers(workers)
        probs = np.asarray(self.label_probs, dtype=float)
        only = None
        if label is not None:
            levels = list(self.transformer.label_column.levels)
            only = int(self.transformer.label_column.encode(pd.Series([label]))[0])
            if only >= len(levels):
                raise UserInputError(
                    f"label {label!r} is not a class of {self.transformer.target!r}"
                )
            probs = np.eye(len(levels))[only]
        probs = probs / probs.sum()
        # A random stream of this call's own: the same seed gives the same table, sampling
        # does not disturb the caller's random state, and calls may run in parallel threads.
        rng = np.random.default_rng(seed)
        call = n if call is None else call
        if pool is None:
            pool = self.call_pool(self.chosen_pool(workers), call)
        check_sample_pool("the raking pool", pool)
        picker: postprocess.Raker | postprocess.Herder | None = None
        # In blocks of output rows, so that memory does not grow with n or the pool.
        block = RAKING_ROWS // pool
        herding = self.herding_pool(call) if pool == 1 else 1  # (chunks of HERDING_MIN rows on)
        # One choice of loops for the whole call (a file's chunks alike), by its generated rows.
        loops = for_rows(call * max(pool, herding if call >= HERDING_MIN else 1))
        if pool > 1:
            assert self.marginals is not None
            picker = postprocess.Raker(self.marginals, self.label_probs, only, loops)
        elif herding > 1 and n >= HERDING_MIN:
            pool = herding
            pairs = herded_pairs(self.transformer) if self.herding_pairs(call) else []
            sizes = self.transformer.code_sizes
            picker = postprocess.Herder(sizes, len(self.label_probs), pairs, loops)
            block = herding_block(n, pool, len(picker.shapes))
        parts = []
        pool_codes = None  # a pool's codes, column by column, reused from pool to pool
        for start in range(0, n, block):
            size = min(block, n - start)
            # ``pool`` generated rows per row kept; raking or herding picks the rows to keep.
            labels = rng.choice(len(probs), size * pool, p=probs)
            if picker is None:
                parts.append((self.generate(labels, rng, workers, loops=loops), labels))
                continue
            if pool_codes is None or len(pool_codes) != len(labels):
                pool_codes = np.empty((len(labels), self.columns()), np.int64, order="F")
            blocks = self.generate(labels, rng, workers, out=pool_codes, loops=loops)
            keep = picker(blocks, labels, size, rng)
            parts.append((blocks[keep], labels[keep]))
        # (One block, as unraked calls of up to RAKING_ROWS rows are: no copy into fresh pages.)
        if len(parts) == 1:
            blocks, labels = parts[0]
        else:
            blocks, labels = (np.concatenate(part) for part in zip(*parts, strict=True))
        # Each wide column's position within its bin: a uniform quantile of its released
        # density there (public randomness, from the same seed).
        positions = rng.uniform(-1.0, 1.0, (n, len(self.transformer.wide_columns)))
        return positions, blocks, labels

    def call_pool(self, pool: int, n: int) -> int:
        """``pool`` for a call of ``n`` rows: a raking pool shrunk toward LARGE_CALL_POOL where
        ``n`` rows at ``pool`` would take more than :func:`matched_rows` generated rows (an
        explicit ``model.sample_pool`` as it is)."""
        if pool == 1 or self.config.sample_pool is not None:
            return pool
        return max(min(LARGE_CALL_POOL, pool), min(pool, matched_rows(self.released_rows) // n))

    def raking_pool(self) -> int:
        """See :func:`raking_pool`: the pool raking would take, where it may rake."""
        return raking_pool(self.config, self.marginals, self.marginal_noise, self.released_rows)

    def chosen_pool(self, workers: int = 1) -> int:
        """The pool sampling takes: ``model.sample_pool`` where set; else, where raking may
        rake, raking or not (tilt and herding), whichever puts rows closer to the released
        marginals by the self-check (:mod:`rdpgan.selfcheck`), on :data:`CHOICE_ROWS` rows
        drawn both ways from a stream of the model's seed; chosen once. Post-processing: it
        reads released values and generated rows only."""
        pool = self.raking_pool()
        if self.config.sample_pool is not None or pool == 1:
            return pool
        with self.tilts.lock:
            chosen = self.tilts.pool
        if chosen is None:
            distances = release_distances(self, (pool, 1), workers)
            chosen = min((pool, 1), key=lambda p: (distances[p], -p))
            with self.tilts.lock:
                self.tilts.pool = chosen
        return chosen

    def release_distance(self, pool: int, workers: int = 1) -> float:
        """The root mean square gap, in noise stds, of :data:`CHOICE_ROWS` rows sampled with
        ``pool`` from every released marginal cell (:func:`rdpgan.selfcheck.overall`)."""
        assert self.marginals is not None
        n = min(CHOICE_ROWS, max(self.released_rows, HERDING_MIN))
        seed = int(np.random.SeedSequence([self.seed, CHOICE_STREAM]).generate_state(1)[0])
        _, codes, labels = self.parts(n, None, seed, workers, pool)
        return selfcheck.overall(self.release_gaps(codes, labels))

    def release_gaps(
        self,
        codes: np.ndarray,
        labels: np.ndarray,
        noise: selfcheck.NoiseStds | None = None,
        released_pairs: int | None = None,
    ) -> list[selfcheck.ReleaseGap]:
        """:func:`rdpgan.selfcheck.release_gaps` of rows sampled from this generator (their
        codes and label codes), in ``noise`` (default: the largest release noise for all)."""
        if self.marginals is None:
            return []
        if noise is None:
            noise = selfcheck.NoiseStds(*(self.marginal_noise,) * 3)
        return selfcheck.release_gaps(
            self.marginals,
            noise,
            self.label_probs,
            self.released_rows,
            codes,
            labels,
            self.transformer.features.names,
            released_pairs,
            self.transformer.label_column.levels,
        )

    def herding_pool(self, n: int) -> int:
        """Generated rows per row kept where a call for ``n`` rows does not rake:
        ``model.herding_pool``, or (null) HERDING_PAIRS_POOL where herding takes pairs, else
        HERDING_POOL, within :func:`matched_rows` for the call; 1 keeps every generated row."""
        if self.config.herding_pool is not None:
            return self.config.herding_pool
        pool = HERDING_PAIRS_POOL if self.herding_pairs(n) else HERDING_POOL
        return max(1, min(pool, matched_rows(self.released_rows) // n))

    def herding_pairs(self, n: int) -> bool:
        """Whether herding a call for ``n`` rows follows pairs of columns too:
        ``model.herding_pairs``, or (null) on tables of at most HERDING_PAIR_COLUMNS feature
        columns for at most HERDING_PAIR_ROWS rows."""
        if self.config.herding_pairs is not None:
            return self.config.herding_pairs
        return self.columns() <= HERDING_PAIR_COLUMNS and n <= HERDING_PAIR_ROWS

    def tilting(self) -> bool:
        """Whether sampling is tilted: ``model.tilt_sampling``, or (null) where the released
        marginals are precise enough (:data:`TILT_NOISE_LIMIT`)."""
        if self.marginals is None:
            return False
        if self.config.tilt_sampling is not None:
            return self.config.tilt_sampling
        return self.marginal_noise <= TILT_NOISE_LIMIT * self.released_rows

    def columns(self) -> int:
        """Feature columns: one code each per generated row."""
        return len(self.generator.layout.block_order)

    def generate(
        self,
        labels: np.ndarray,
        rng: np.random.Generator,
        workers: int = 1,
        out: np.ndarray | None = None,
        loops: ModuleType = numpy_kernels,
    ) -> np.ndarray:
        """The codes of one generated row per label (by ``loops``, :mod:`rdpgan.loops`), each
        class's rows in passes of their own (with the class's tilt), each pass with a stream of
        its own seeded from ``rng``'s draws (so calls with the same seed but different ``n`` or
        blocks do not share them), so that ``workers`` threads (each with one BLAS thread) give
        the same rows as one. Written into ``out`` ([rows, columns] int64) if given: a raked
        pool's codes, tens of MB, cost more in their pages' first touch than in being written."""
        generator = self.generator
        tilts = self.class_tilts()
        codes = np.empty((len(labels), self.columns()), np.int64) if out is None else out
        passes = [
            (label, chosen[start : start + SAMPLE_CHUNK])
            for label in np.unique(labels).tolist()
            for chosen in [np.flatnonzero(labels == label)]
            for start in range(0, len(chosen), SAMPLE_CHUNK)
        ]
        streams = [np.random.default_rng(s) for s in rng.integers(0, 2**63, len(passes)).tolist()]

        def generate_pass(index: int) -> None:
            (label, rows), stream = passes[index], streams[index]
            y = np.eye(len(self.label_probs), dtype=np.float32)[label]
            tilt = None if tilts is None else tilts[label]
            z = generator.latent_draws(stream, len(rows))
            ys = np.broadcast_to(y, (len(rows), len(y)))
            codes[rows] = generator.sample_codes(z, ys, stream, tilt, loops)

        if workers <= 1 or len(passes) <= 1:
            for index in range(len(passes)):
                generate_pass(index)
            return codes
        on_threads(generate_pass, range(len(passes)), workers)
        return codes

    def class_tilts(self) -> list[list[np.ndarray]] | None:
        """Sampling's tilt per class (:func:`rdpgan.postprocess.class_tilts`), or None without
        released marginals or where :meth:`tilting` says no; fitted once."""
        if not self.tilting():
            return None
        assert self.marginals is not None
        with self.tilts.lock:
            if self.tilts.fitted is None:
                rng = np.random.default_rng([self.seed, TILT_STREAM])
                # The noise of one cell of a class's released distribution, in probability
                # units: public. marginal_noise is the larger of the marginal releases' (with
                # pairs released, the pairs' on Adult, 1.4 times the per-class tables' own at
                # ε=8), so the tilt shrinks toward G a little more than the per-class noise
                # alone asks; rounds 19-20 ran with it.
                counts = np.maximum(self.label_probs * self.released_rows, 1.0)
                variance = (self.marginal_noise / counts) ** 2
                self.tilts.fitted = postprocess.class_tilts(
                    self.generator, self.marginals, list(variance), TILT_ROWS, rng
                )
            return self.tilts.fitted


def release_distances(sampler: Sampler, pools: Sequence[int], workers: int = 1) -> dict[int, float]:
    """:meth:`Sampler.release_distance` of each of ``pools``; with as many ``workers`` as
    pools, side by side, a thread each, generating on one BLAS thread (as a call on several
    workers generates: the same rows, so the same distances): one pool's raking or herding,
    on one core, runs beside the other's products (Adult's choice at ε=8 on 2 cores: 2.1 s in
    turn, 1.6 s side by side). Else in turn, each on ``workers``. An error or Ctrl-C surfaces
    once the other pool's measurement ends (about a second on Adult)."""
    if workers != len(pools) or workers <= 1:
        return {pool: sampler.release_distance(pool, workers) for pool in pools}
    sampler.class_tilts()  # fitted before the threads, as a call fits it
    distances = on_threads(sampler.release_distance, pools, workers)
    return dict(zip(pools, distances, strict=True))
