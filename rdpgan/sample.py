"""``python -m rdpgan.sample run_dir=... out=synthetic.parquet n=1000000``: rows from a saved run.

The format follows the extension of ``out`` (``.csv`` or ``.parquet``). Rows are generated and
written ``chunk_size`` at a time, so memory stays bounded whatever ``n`` is, into a temporary file
beside ``out`` that replaces it only once complete: no reader ever sees a half-written file, and a
failure leaves nothing behind. Chunk ``i`` is ``model.sample(size_i, label, seed=chunk_seed(seed,
i))``, so the file is a pure function of (model, n, label, seed, chunk_size).

``label`` is text on the command line (``label='>50K'`` or ``label=1`` both work from a shell) and
is matched against the target's declared levels: by value when they are numeric, else as text.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hydra.core.override_parser.types import Quote, QuotedString
from omegaconf import DictConfig

from rdpgan.cli import guarded, precheck_overrides, to_typed
from rdpgan.config import SampleCliConfig, register_configs
from rdpgan.data.schema import Categorical, Schema
from rdpgan.errors import UserInputError
from rdpgan.io import atomic_write
from rdpgan.synthesizer import DPCGAN

register_configs()

ARROW_TYPES = {"int64": pa.int64(), "float64": pa.float64(), "object": pa.string()}


def chunk_seed(seed: int, index: int) -> int:
    """The torch seed of chunk ``index``: independent streams per chunk, reproducible by seed."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, np.uint64)[0])


def iter_samples(
    model: DPCGAN, n: int, label: Any = None, seed: int = 0, chunk_size: int = 100_000
) -> Iterator[pd.DataFrame]:
    """``n`` rows as consecutive frames of at most ``chunk_size`` rows."""
    for index, start in enumerate(range(0, n, chunk_size)):
        size = min(chunk_size, n - start)
        yield model.sample(size, label=label, seed=chunk_seed(seed, index))


def resolve_label(column: Categorical, label: Any) -> Any:
    """The declared level ``label`` names: by value if the levels are numeric (1 = 1.0 = "1")."""
    if column.numeric:
        try:
            wanted: Any = float(label)
        except (TypeError, ValueError):
            wanted = None
        matches = [level for level in column.levels if float(level) == wanted]
    else:
        matches = [level for level in column.levels if str(level) == str(label)]
    if not matches:
        classes = ", ".join(str(level) for level in column.levels)
        raise UserInputError(
            f"unknown label {label!r}: the classes of {column.name!r} are {classes}"
        )
    return matches[0]


def load_model(run_dir: Path) -> DPCGAN:
    if not run_dir.is_dir():
        raise UserInputError(f"run directory {run_dir} does not exist")
    return DPCGAN.load(run_dir)


def write_csv(path: Path, chunks: Iterable[pd.DataFrame], schema: Schema) -> None:
    with open(path, "w", newline="") as handle:
        for index, frame in enumerate(chunks):
            frame.to_csv(handle, index=False, header=index == 0)


def write_parquet(path: Path, chunks: Iterable[pd.DataFrame], schema: Schema) -> None:
    # Declared up front from the schema: a chunk whose column is all missing would otherwise
    # infer a null type that does not match the file's first chunk.
    arrow = pa.schema([(name, ARROW_TYPES[dtype]) for name, dtype in schema.dtypes().items()])
    with pq.ParquetWriter(path, arrow) as writer:
        for frame in chunks:
            writer.write_table(pa.Table.from_pandas(frame, schema=arrow, preserve_index=False))


Writer = Callable[[Path, Iterable[pd.DataFrame], Schema], None]
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
) -> int:
    """Sample into ``out`` chunk by chunk and atomically; returns the number of rows written."""
    out = Path(out)
    writer = output_writer(out)
    assert model.transformer is not None
    schema = model.transformer.schema
    n = model.released_rows if n is None else n
    if label is not None:
        label = resolve_label(model.transformer.label_column, label)
    chunks = iter_samples(model, n, label, model.seed if seed is None else seed, chunk_size)
    try:
        atomic_write(out, lambda tmp: writer(tmp, chunks, schema))
    except OSError as exc:
        raise UserInputError(f"cannot write {out}: {exc.strerror or exc}") from exc
    return n


def run(cfg: SampleCliConfig) -> None:
    """Every check that needs no model runs first, so bad input fails before any work."""
    if cfg.n is not None and cfg.n <= 0:
        raise UserInputError(f"n must be a positive integer, got {cfg.n}")
    if cfg.chunk_size <= 0:
        raise UserInputError(f"chunk_size must be a positive integer, got {cfg.chunk_size}")
    if cfg.seed is not None and cfg.seed < 0:
        raise UserInputError(f"seed must be a non-negative integer, got {cfg.seed}")
    out = Path(cfg.out)
    output_writer(out)
    model = load_model(Path(cfg.run_dir))
    n = write_samples(model, out, cfg.n, cfg.label, cfg.seed, cfg.chunk_size)
    print(f"wrote {n} synthetic rows to {out}")


def quote_label(args: list[str]) -> list[str]:
    """Pass ``label=`` through Hydra as a quoted string: class names like >50K are not values
    Hydra's override grammar accepts bare."""
    quoted = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if key == "label" and sep and not value.startswith(("'", '"')):
            arg = f"label={QuotedString(value, Quote.single).with_quotes()}"
        quoted.append(arg)
    return quoted


@hydra.main(config_path="../configs", config_name="sample", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    guarded(lambda: run(to_typed(cfg, SampleCliConfig)))


def main() -> None:
    sys.argv[1:] = quote_label(sys.argv[1:])
    precheck_overrides("sample", sys.argv[1:])
    _hydra_main()


if __name__ == "__main__":
    main()
