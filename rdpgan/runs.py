"""A run directory's private tables, rebuilt from its ``run.json`` (never stored in the run).

Used by a fresh run (which releases its schema) and by everything that needs a run's rows
after the fact (resume, evaluation, the privacy report): the same file, split seed and schema
settings give the same rows. A private schema is released once, with the run's secret
randomness (OS entropy unless ``privacy.noise_seed``), and recorded in ``schema.yaml``; later
readers take it from there, so nothing is released twice and the noise never follows from the
run's ``seed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from rdpgan import checkpoint
from rdpgan.cli import RUN_RECORD
from rdpgan.config import RunConfig
from rdpgan.data.loading import conditioned, load_tables
from rdpgan.data.schema import Schema
from rdpgan.data.schema_file import read_schema_file, schema_yaml
from rdpgan.errors import UserInputError, first_line
from rdpgan.io import atomic_write
from rdpgan.privacy.budget import LEDGER_FILE
from rdpgan.privacy.ledger import SEEDED_NOTE, PrivacyLedger, Release
from rdpgan.privacy.private_schema import SchemaBudget, SchemaRelease
from rdpgan.privacy.randomness import SCHEMA_STREAM, SecretRandomness

RELEASED_SCHEMA = "schema.yaml"
# What a failed run keeps once its ledger is on disk: the ledger, the schema it paid for, and
# what resume=true needs to finish the job. Deleting them would forget privacy already spent.
SPENDING_RECORD = (LEDGER_FILE, RUN_RECORD, RELEASED_SCHEMA, checkpoint.META, *checkpoint.SLOTS)


def release_run_tables(
    cfg: RunConfig, pay: Callable[[list[Release]], None] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, SchemaRelease]:
    """A fresh run's train rows, held-out test rows and schema: a private schema is released
    now, with fresh noise, after ``pay`` has seen its cost (record it there: the noise comes
    next)."""
    rng = SecretRandomness(cfg.privacy.noise_seed, SCHEMA_STREAM).numpy
    budget = SchemaBudget(cfg.epsilon, cfg.delta, cfg.privacy.accountant)
    train, test, release = load_tables(
        cfg.dataset, cfg.schema, cfg.data.root, budget, rng, None, pay
    )
    # A run that named no target is, from here on (its run.json included), one that named the
    # column its schema chose.
    cfg.dataset = conditioned(cfg.dataset, release)
    return train, test, release


def load_run_tables(
    cfg: RunConfig, run_dir: Path, expected: Schema | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, SchemaRelease]:
    """An existing run's tables, with the schema it already released (nothing new is drawn);
    ``expected``: the schema it was trained with (another one is refused)."""
    released = _recorded_schema(run_dir) if cfg.schema.source == "private" else None
    budget = SchemaBudget(cfg.epsilon, cfg.delta, cfg.privacy.accountant)
    return load_tables(
        cfg.dataset, cfg.schema, cfg.data.root, budget, None, released, expected=expected
    )


def record_schema(
    run_dir: Path, cfg: RunConfig, release: SchemaRelease, ledger: PrivacyLedger | None
) -> None:
    """Keep the run's schema beside it as ``schema.yaml`` (a private one is a DP release: as
    safe as ``model.json``), in the format ``schema.file=`` reads; a fresh release with the
    accountant and Rényi order of the ``ledger`` that paid for it (fixed before it)."""
    fresh = bool(release.releases) and not release.reused
    seeded = [SEEDED_NOTE] if fresh and cfg.privacy.noise_seed is not None else []
    if fresh and ledger is not None:
        release = replace(release, accountant=ledger.accountant, order=ledger.order)
    text = schema_yaml(release, cfg.schema.source, seeded)
    atomic_write(run_dir / RELEASED_SCHEMA, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _recorded_schema(run_dir: Path) -> Schema:
    path = run_dir / RELEASED_SCHEMA
    if not path.is_file():
        raise UserInputError(f"{run_dir} has no {RELEASED_SCHEMA}: its private schema is lost")
    try:
        return read_schema_file(path)
    except UserInputError:
        raise
    except Exception as exc:  # a wrong shape or an invalid column alike
        raise UserInputError(f"{path} is not a valid schema: {first_line(exc)}") from exc


def require_finished(run_dir: Path, *names: str) -> None:
    """A one-line error unless ``run_dir`` holds every file in ``names``."""
    for name in names:
        if not (run_dir / name).is_file():
            raise UserInputError(f"{run_dir} is not a finished run: {name} is missing")


def require_held_out(cfg: RunConfig, what: str) -> None:
    """A one-line error when the run held no rows out (``dataset.test_size=0``)."""
    if cfg.dataset.test_size == 0:
        raise UserInputError(
            f"{what} needs held-out real rows, and this run trained on every row "
            "(dataset.test_size=0); train with dataset.test_size > 0 to evaluate"
        )
