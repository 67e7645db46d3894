"""A run directory's private tables, rebuilt from its ``run.json`` (never stored in the run).

Shared by everything that needs a run's training rows after the fact (resume, evaluation, the
privacy report): the same file, split seed and schema settings give the same rows, and the
same run seed gives a private schema the same noise, so nothing new is released.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rdpgan.config import RunConfig
from rdpgan.errors import UserInputError
from rdpgan.privacy.private_schema import SchemaRelease, load_tables

SCHEMA_STREAM = 1  # keeps the schema's noise apart from the label and training noise


def load_run_tables(cfg: RunConfig) -> tuple[pd.DataFrame, pd.DataFrame, SchemaRelease]:
    """Train rows, held-out test rows and the schema with its cost."""
    rng = np.random.default_rng([cfg.seed, SCHEMA_STREAM])
    return load_tables(cfg.dataset, cfg.schema, cfg.data.root, cfg.epsilon, rng)


def require_finished(run_dir: Path, *names: str) -> None:
    """A one-line error unless ``run_dir`` holds every file in ``names``."""
    for name in names:
        if not (run_dir / name).is_file():
            raise UserInputError(f"{run_dir} is not a finished run: {name} is missing")
