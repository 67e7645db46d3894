"""Declared schemas on disk: the YAML ``schema.file=`` reads and a run writes as ``schema.yaml``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd
import yaml

from rdpgan.config import ColumnSpec, DatasetConfig, SchemaConfig
from rdpgan.data.schema import Schema
from rdpgan.errors import UserInputError
from rdpgan.privacy.private_schema import SchemaRelease


def declared_schema(dataset: DatasetConfig, config: SchemaConfig) -> Schema:
    """The dataset's declared columns, or the column list in ``config.file``."""
    if config.file is None:
        if not dataset.columns:
            raise UserInputError(
                f"dataset {dataset.name!r} declares no schema columns; give schema.file=FILE, "
                "or use schema=private (paid from epsilon) or schema=unsafe_infer"
            )
        return Schema.from_specs(dataset.columns)
    return read_schema_file(Path(config.file))


def read_schema_file(path: Path) -> Schema:
    """A YAML list of column specs, or a mapping with such a list under ``columns`` (the
    ``schema.yaml`` a run writes)."""
    if not path.is_file():
        raise UserInputError(f"schema file {path} not found")
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UserInputError(f"schema file {path} is not valid YAML") from exc
    specs = loaded.get("columns") if isinstance(loaded, dict) else loaded
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise UserInputError(f"schema file {path} must hold a list of column specs")
    try:
        return Schema.from_specs(specs)
    except TypeError as exc:
        raise UserInputError(f"schema file {path}: {exc}") from exc


def dropped_by_file(config: SchemaConfig, frame: pd.DataFrame, target: str) -> list[str]:
    """The columns a declared ``schema.yaml`` lists as ``dropped`` (a run's own record of what
    it left out), so that the file trains again as it is; those not in the data are ignored,
    and one the file also lists as a column (or the target) is an edited file's mistake."""
    if config.source != "declared" or config.file is None or not Path(config.file).is_file():
        return []
    try:
        loaded = yaml.safe_load(Path(config.file).read_text())
    except yaml.YAMLError:
        return []  # declared_schema reports it
    dropped = loaded.get("dropped") if isinstance(loaded, dict) else None
    if not isinstance(dropped, dict):
        return []
    columns = loaded.get("columns")
    kept = (
        {c.get("name") for c in columns if isinstance(c, dict)}
        if isinstance(columns, list)
        else set()
    )
    for name in dropped:
        if name == target or name in kept:
            raise UserInputError(
                f"schema file {config.file} lists {name!r} both as dropped and as "
                + ("the target" if name == target else "a column")
            )
    return [n for n in dropped if n in frame.columns and n not in config.drop]


def schema_yaml(release: SchemaRelease, source: str) -> str:
    """``release`` as the YAML ``schema.file=`` reads, with what it cost and what was dropped,
    so a user can review it, edit it and declare it next time."""
    head = {
        "private": f"Released with DP (schema=private): epsilon {release.epsilon:.4g}, "
        f"delta {release.delta:.3g} (in the run's privacy.json, unless privacy=none).",
        "unsafe_infer": "NOT PRIVATE: read off the rows (schema=unsafe_infer).",
        "declared": "Declared (public), as given.",
    }[source]
    defaults = asdict(ColumnSpec())
    columns = [
        {
            key: value
            for key, value in spec.items()
            if key in ("name", "kind") or value != defaults[key]
        }
        for spec in release.schema.to_specs()
    ]
    body = {"columns": columns, "dropped": dict(release.dropped)}
    return (
        f"# {head}\n# Reuse it as a declared schema (free): schema.file=schema.yaml\n"
        + yaml.safe_dump(body, sort_keys=False, allow_unicode=True)
    )
