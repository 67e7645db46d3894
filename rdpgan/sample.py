"""``python -m rdpgan.sample run_dir=... out=synthetic.parquet n=1000000``: rows from a saved run.

The format follows the extension of ``out`` (``.csv`` or ``.parquet``). Rows are generated and
written ``chunk_size`` at a time, so memory stays bounded whatever ``n`` is, into a temporary file
beside ``out`` that replaces it only once complete: no reader ever sees a half-written file, and a
failure leaves nothing behind. Chunk ``i`` is ``model.sample(size_i, label, seed=chunk_seed(seed,
i))``, so the file is a pure function of (model, its sampling settings, n, label, seed,
chunk_size), on one kind of CPU, numpy build and numba build (float32 products and sums may
round otherwise elsewhere) and one rdpgan version (files made before 807d16c, where sampling's
compiled loops and passes of 2,048 rows settled, differ in their rows). A run
saved with ``model.sample_pool`` null rakes at this version's default pool (32 since b31ba30, 4
before: ``sample_pool=4`` gives the earlier files).
``sample_pool``, ``herding_pool``, ``herding_pairs`` and ``tilt_sampling`` override the run's
sampling settings for this file only: ``sample_pool=1`` skips raking (many times faster, farther
from the released pairs), ``herding_pool=1`` then keeps every generated row (no herding: faster
again, rows scattered around G's distribution as drawn), and ``herding_pairs=false`` herds
columns alone (faster). Whether herding follows pairs is decided once for the file, from its
``n``. (Runs saved at a38efaf recorded ``herding_pairs`` null when null meant no pairs: they
now herd pairs where the rule says so; ``herding_pairs=false`` gives their earlier files.)

Speed: nothing here imports torch or the DP machinery (sampling is numpy, and numba's compiled
loops for calls large enough to repay their start: :mod:`rdpgan.frozen`, :mod:`rdpgan.loops`),
nor pandas (rows go to Arrow from numpy buffers, :mod:`rdpgan.arrow`; pandas loads only to
spell dates, to test conditions or to read a ``label``).
Chunks are generated and converted to Arrow tables by a pool of threads (one per CPU core, each
with a single-threaded BLAS: whole chunks in parallel beat parallel matrix products, since
random draws and decoding are serial) while earlier chunks are written, in order, by Arrow's C++
writers (pandas' CSV writer alone would cost more than generating the rows). At most two chunks
per worker are in memory at once.

``label`` is text on the command line (``label='>50K'`` or ``label=1`` both work from a shell) and
is matched against the target's declared levels: by value when they are numeric, else as text.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from hydra.core.override_parser.types import Quote, QuotedString
from omegaconf import DictConfig
from threadpoolctl import threadpool_limits

from rdpgan.cli import guarded, run_in_place, to_typed
from rdpgan.config import SampleCliConfig, register_configs
from rdpgan.data.schema import Categorical, Schema
from rdpgan.errors import UserInputError
from rdpgan.io import atomic_write
from rdpgan.sampler import check_sample_pool, check_seed
from rdpgan.synthesizer import DPCGAN
from rdpgan.threads import usable_cores

register_configs()

ARROW_TYPES = {"int64": pa.int64(), "float64": pa.float64(), "object": pa.string()}


def chunk_seed(seed: int, index: int) -> int:
    """The seed of chunk ``index``: independent streams per chunk, reproducible by seed."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, np.uint64)[0])


def chunk_sizes(n: int, chunk_size: int) -> list[int]:
    return [min(chunk_size, n - start) for start in range(0, n, chunk_size)]


def iter_samples(
    model: DPCGAN,
    n: int,
    label: Any = None,
    seed: int = 0,
    chunk_size: int = 100_000,
    workers: int = 1,
    conditions: Mapping[str, Any] | None = None,
) -> Iterator[pa.Table]:
    """``n`` rows as consecutive Arrow tables of at most ``chunk_size`` rows, by ``workers``
    threads: chunks side by side, or, with fewer chunks than workers, each chunk's generator
    passes side by side. Every matrix product runs on one BLAS thread (BLAS threads are
    process-wide: restored when the iteration ends), since products split over threads round
    otherwise (in the last bit, which moves a draw now and then): the tables do not depend on
    ``workers``. With ``conditions``, only rows that meet them (:mod:`rdpgan.conditions`)."""
    sizes = chunk_sizes(n, chunk_size)
    inner = max(1, workers // len(sizes))

    def chunk(index: int, size: int) -> pa.Table:
        seeded = chunk_seed(seed, index)
        if conditions:
            rows = model.sample(size, label, seeded, inner, conditions)
            return pa.Table.from_pandas(rows, preserve_index=False)
        # (The chunks are one call of n rows: matched from as many generated rows as that.)
        return model.sample_arrow(size, label=label, seed=seeded, workers=inner, call=n)

    with threadpool_limits(1, user_api="blas"):
        yield from ordered_parallel(chunk, sizes, min(workers, len(sizes)))


def ordered_parallel(
    task: Callable[[int, int], Any], sizes: list[int], workers: int
) -> Iterator[Any]:
    """``task(i, sizes[i])`` for every i, in order, computed by ``workers`` threads at most
    ``2 * workers`` ahead of the consumer (so memory stays bounded)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque = deque()
        for index, size in enumerate(sizes):
            pending.append(pool.submit(task, index, size))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()  # re-raises the task's exception here
        while pending:
            yield pending.popleft().result()


def sampling_workers() -> int:
    """Threads for :func:`iter_samples` on this machine: one per core (at most 4), over chunks
    or, with fewer chunks, within them."""
    return max(1, min(4, usable_cores()))


def resolve_label(column: Categorical, label: Any) -> Any:
    """The declared level ``label`` names (:meth:`Categorical.level_named`)."""
    level = column.level_named(label)
    if level is None:
        classes = ", ".join(str(level) for level in column.levels)
        raise UserInputError(
            f"unknown label {label!r}: the classes of {column.name!r} are {classes}"
        )
    return level


def load_model(run_dir: Path) -> DPCGAN:
    if not run_dir.is_dir():
        raise UserInputError(f"run directory {run_dir} does not exist")
    return DPCGAN.load(run_dir)


def arrow_schema(schema: Schema, spelled: bool = False) -> pa.Schema:
    """Declared up front from the schema: a chunk whose column is all missing would otherwise
    infer a null type that does not match the file's first chunk. ``spelled``: the columns a
    CSV spells otherwise than as numbers (dates, missing tokens) are text."""
    text = {c.name for c in schema.spelled} if spelled else set()
    return pa.schema(
        [
            (name, pa.string() if name in text else ARROW_TYPES[dtype])
            for name, dtype in schema.dtypes().items()
        ]
    )


def write_csv(path: Path, tables: Iterable[pa.Table], schema: pa.Schema) -> None:
    with pa_csv.CSVWriter(path, schema) as writer:
        for table in tables:
            writer.write_table(table)


def write_parquet(path: Path, tables: Iterable[pa.Table], schema: pa.Schema) -> None:
    with pq.ParquetWriter(path, schema) as writer:
        for table in tables:
            writer.write_table(table)


Writer = Callable[[Path, Iterable[pa.Table], pa.Schema], None]
WRITERS: dict[str, Writer] = {".csv": write_csv, ".parquet": write_parquet}


def output_writer(out: Path) -> Writer:
    """The writer for ``out``'s extension, once ``out`` is known to be a writable place."""
    writer = WRITERS.get(out.suffix.lower())
    if writer is None:
        raise UserInputError(
            f"out={out}: unknown extension {out.suffix!r}; use {' or '.join(WRITERS)}"
        )
    if not out.parent.is_dir():
        raise UserInputError(f"cannot write {out}: {out.parent} is not a directory")
    if out.is_dir():
        raise UserInputError(f"cannot write {out}: it is a directory")
    return writer


def write_samples(
    model: DPCGAN,
    out: str | Path,
    n: int | None = None,
    label: Any = None,
    seed: int | None = None,
    chunk_size: int = 100_000,
    workers: int = 1,
    conditions: Mapping[str, Any] | None = None,
) -> int:
    """Sample into ``out`` chunk by chunk and atomically; returns the number of rows written.

    The file does not depend on ``workers`` (see :func:`iter_samples`).
    """
    out = Path(out)
    writer = output_writer(out)
    assert model.transformer is not None
    n = model.released_rows if n is None else n
    if label is not None:
        label = resolve_label(model.transformer.label_column, label)
    schema = model.transformer.schema
    spelled = writer is write_csv  # a typed file keeps numbers (days, null) as numbers
    arrow = arrow_schema(schema, spelled)
    tables = iter_samples(
        model,
        n,
        label,
        model.seed if seed is None else seed,
        chunk_size,
        workers,
        conditions,
    )
    if spelled:
        tables = (schema.written_arrow(table) for table in tables)
    tables = (table.cast(arrow) for table in tables)  # a no-op unless a chunk's types differ
    try:
        atomic_write(out, lambda tmp: writer(tmp, tables, arrow))
    except OSError as exc:
        raise UserInputError(f"cannot write {out}: {exc.strerror or exc}") from exc
    return n


def run(cfg: SampleCliConfig) -> None:
    """Every check that needs no model runs first, so bad input fails before any work."""
    if cfg.n is not None and cfg.n <= 0:
        raise UserInputError(f"n must be a positive integer, got {cfg.n}")
    if cfg.chunk_size <= 0:
        raise UserInputError(f"chunk_size must be a positive integer, got {cfg.chunk_size}")
    if cfg.seed is not None:
        check_seed("seed", cfg.seed)
    check_sample_pool("sample_pool", cfg.sample_pool)
    check_sample_pool("herding_pool", cfg.herding_pool)
    out = Path(cfg.out)
    output_writer(out)
    model = load_model(Path(cfg.run_dir))
    chosen = {
        "sample_pool": cfg.sample_pool,
        "herding_pool": cfg.herding_pool,
        "herding_pairs": cfg.herding_pairs,
        "tilt_sampling": cfg.tilt_sampling,
    }
    settings = {name: value for name, value in chosen.items() if value is not None}
    model.model_config = replace(model.model_config, **settings)
    rows = model.released_rows if cfg.n is None else cfg.n
    # Once for the file, not per chunk: every chunk herds alike.
    pairs = model.sampler.herding_pairs(rows)
    model.model_config = replace(model.model_config, herding_pairs=pairs)
    workers = sampling_workers()
    n = write_samples(
        model, out, cfg.n, cfg.label, cfg.seed, cfg.chunk_size, workers, cfg.conditions
    )
    for note in model.privacy_notes:  # after the work: bad input stays a one-line error
        print(f"WARNING: {note}", file=sys.stderr)
    print(f"wrote {n} synthetic rows to {out}")


def quote_label(args: list[str]) -> list[str]:
    """Pass ``label=`` and ``conditions.COLUMN=`` through Hydra as quoted strings (but a
    ``[low, high]`` range): class names like >50K are not values Hydra's override grammar
    accepts bare. A condition names a column the config does not know: it is added (``+``)."""
    quoted = []
    for arg in args:
        key, sep, value = arg.partition("=")
        condition = key.lstrip("+").startswith("conditions.")
        if condition:
            key = "+" + key.lstrip("+")
        if sep and (key == "label" or condition) and not value.startswith(("'", '"', "[")):
            value = QuotedString(value, Quote.single).with_quotes()
        quoted.append(f"{key}{sep}{value}")
    return quoted


def sample_job(cfg: DictConfig) -> None:
    """The sample command's job: write the file ``cfg`` asks for."""
    guarded(lambda: run(to_typed(cfg, SampleCliConfig)))


def main() -> None:
    sys.argv[1:] = quote_label(sys.argv[1:])
    run_in_place("sample", sample_job, sys.argv[1:])


if __name__ == "__main__":
    main()
