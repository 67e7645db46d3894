"""Declared schemas on disk: the YAML ``schema.file=`` reads and a run writes as ``schema.yaml``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from rdpgan.config import ColumnSpec, DatasetConfig, SchemaConfig
from rdpgan.data.schema import Categorical, Schema
from rdpgan.errors import UserInputError
from rdpgan.privacy.ledger import Release
from rdpgan.privacy.private_schema import SchemaRelease

# What a reused schema.yaml that no longer matches its fingerprint brings into the ledger,
# beside the cost it still records (the edit may follow the data: the ledger cannot say).
EDITED_NOTE = (
    "schema file {path} was released with DP by an earlier run and edited since (it no longer "
    "matches its fingerprint): its recorded cost is composed as it reads, and the edits are "
    "the user's own, outside this ledger"
)


def declared_release(dataset: DatasetConfig, config: SchemaConfig) -> SchemaRelease:
    """The dataset's declared columns (public: free), or the schema in ``config.file`` with
    the cost it carries (see :func:`read_schema_release`)."""
    if config.file is None:
        if not dataset.columns:
            raise UserInputError(
                f"dataset {dataset.name!r} declares no schema columns; give schema.file=FILE, "
                "or use schema=private (paid from epsilon) or schema=unsafe_infer"
            )
        return SchemaRelease(Schema.from_specs(dataset.columns))
    return read_schema_release(Path(config.file))


def read_schema_file(path: Path) -> Schema:
    """A YAML list of column specs, or a mapping with such a list under ``columns`` (the
    ``schema.yaml`` a run writes)."""
    return _schema(path, _load(path))


def read_schema_release(path: Path) -> SchemaRelease:
    """The schema in ``path`` with what it cost: a ``schema.yaml`` that a private release
    wrote carries its releases, notes, accountant and Rényi order, and brings them into the
    ledger of every run that reads it (a released schema is paid for wherever it travels).
    An edited one (its fingerprint no longer matches, or its cost section is gone) still
    brings the cost it records, with a note that it was edited."""
    loaded = _load(path)
    schema = _schema(path, loaded)
    if not isinstance(loaded, dict) or ("cost" not in loaded and "fingerprint" not in loaded):
        return _with_condition(SchemaRelease(schema), loaded, path)  # by hand: public, free
    cost = loaded.get("cost") or {}
    edited = loaded.get("fingerprint") != fingerprint(loaded)
    try:
        release = SchemaRelease(
            schema,
            [Release.from_dict(entry) for entry in cost.get("mechanisms", [])],
            [str(note) for note in cost.get("notes", [])],
            epsilon=float(cost.get("epsilon", 0.0)),
            delta=float(cost.get("delta", 0.0)),
            reused=True,
            accountant=cost.get("accountant"),
            order=None if cost.get("order") is None else float(cost["order"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserInputError(f"schema file {path}: its cost section is damaged") from exc
    if edited:
        release.notes.append(EDITED_NOTE.format(path=path))
    return _with_condition(release, loaded, path)


def _with_condition(release: SchemaRelease, loaded: Any, path: Path) -> SchemaRelease:
    """``release`` with the column (and positive class) the run that wrote the file chose to
    condition on, where it named no target: a run reusing the file without one takes the same
    (a condition naming no categorical column is refused)."""
    condition = loaded.get("condition") if isinstance(loaded, dict) else None
    if condition is None:
        return release
    target = condition.get("target") if isinstance(condition, dict) else None
    if target not in release.schema.names or not isinstance(release.schema[target], Categorical):
        raise UserInputError(f"schema file {path}: its condition names no categorical column")
    release.target, release.positive = target, condition.get("positive")
    return release


def fingerprint(body: dict[str, Any]) -> str:
    """A digest of a schema file's columns, dropped columns and cost, as parsed (comments and
    layout do not count): what tells an unedited released schema from an edited one."""
    content = {key: body.get(key) for key in ("columns", "dropped", "cost")}
    text = json.dumps(content, sort_keys=True, default=str, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _load(path: Path) -> Any:
    if not path.is_file():
        raise UserInputError(f"schema file {path} not found")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UserInputError(f"schema file {path} is not valid YAML") from exc


def _schema(path: Path, loaded: Any) -> Schema:
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
        return []  # declared_release reports it
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


def schema_yaml(release: SchemaRelease, source: str, notes: Sequence[str] = ()) -> str:
    """``release`` as the YAML ``schema.file=`` reads, with what was dropped and, where it
    cost privacy or carries opt-out ``notes``, that cost and a fingerprint: a run that reads
    it unedited composes the cost into its own ledger."""
    defaults = asdict(ColumnSpec())
    columns = [
        {
            key: value
            for key, value in spec.items()
            if key in ("name", "kind") or value != defaults[key]
        }
        for spec in release.schema.to_specs()
    ]
    body: dict[str, Any] = {"columns": columns, "dropped": dict(release.dropped)}
    if release.target is not None:  # the column a run without a target chose: reuse keeps it
        body["condition"] = {"target": release.target, "positive": release.positive}
    carried = list(dict.fromkeys([*release.notes, *notes]))
    if release.releases or carried:
        body["cost"] = {
            "epsilon": release.epsilon,
            "delta": release.delta,
            "accountant": release.accountant,
            "order": release.order,
            "mechanisms": [r.to_dict() for r in release.releases],
            "notes": carried,
        }
        # Of the file as it will read back: a value YAML does not keep to the letter (a
        # U+0085 in a level) must not make an unedited file look edited.
        body["fingerprint"] = fingerprint(yaml.safe_load(_dumped(body)))
    if release.releases:
        head = (
            f"Released with DP: epsilon {release.epsilon:.4g}, delta {release.delta:.3g} on its "
            "own.\n# Reuse it with schema.file=schema.yaml: its cost (below) joins that run's "
            "ledger; edited, the ledger notes it too."
        )
    elif source == "unsafe_infer":
        head = "NOT PRIVATE: read off the rows (schema=unsafe_infer). Reused, it says so."
    elif carried:
        head = "Declared, with notes that travel with it (cost.notes). Reused, it says so."
    else:
        head = "Declared (public), as given. Reuse it as a declared schema (free)."
    return f"# {head}\n" + _dumped(body)


def _dumped(body: dict[str, Any]) -> str:
    return yaml.safe_dump(body, sort_keys=False, allow_unicode=True)
