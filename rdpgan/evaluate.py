"""``python -m rdpgan.evaluate run_dir=...``: utility and fidelity of a run's synthetic table.

Utility is the paper's score: eight classifiers are trained on ``synthetic.csv`` and scored by
AUROC on the run's held-out real rows (``test.csv``); the same eight trained on the real train
split give the ``real`` reference row. Fidelity (:mod:`rdpgan.fidelity`) compares the synthetic
table's marginals with the real train split's, at the public bins (``fidelity``) and at 20
quantiles of each numeric train column (``fidelity_quantile``); the held-out rows, scored the
same way, give the floors (``fidelity_floor``, ``fidelity_quantile_floor``: what a fresh sample
of real rows achieves). The real train split is rebuilt from the run's own ``run.json`` (same
file, same split seed) and, for a private schema, its ``schema.yaml``, so it never has to be
written into the run directory.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from rdpgan.cli import guarded, read_run_config, run_in_place, to_typed
from rdpgan.config import EvaluateConfig, register_configs
from rdpgan.data.schema import Categorical, Schema
from rdpgan.data.target import matching_class
from rdpgan.errors import UserInputError
from rdpgan.fidelity import Resolution, fidelity_scores
from rdpgan.io import read_json, write_json
from rdpgan.runs import load_run_tables, require_finished, require_held_out
from rdpgan.utility import UtilityScores, classifier_auroc

register_configs()

#: evaluation.json's key of each resolution's scores (the held-out floor: the key + "_floor").
FIDELITY_KEYS: dict[Resolution, str] = {"public": "fidelity", "quantile": "fidelity_quantile"}


def score_table(
    train: pd.DataFrame,
    test: pd.DataFrame,
    schema: Schema,
    target: str,
    positive: Any,
    seed: int,
    n_jobs: int = 2,
) -> UtilityScores:
    features = schema.without(target).columns
    return classifier_auroc(
        train,
        test,
        target,
        positive,
        categorical=[c.name for c in features if isinstance(c, Categorical)],
        continuous=[c.name for c in features if not isinstance(c, Categorical)],
        seed=seed,
        n_jobs=n_jobs,
    )


def evaluate_run(
    run_dir: str | Path,
    seed: int = 0,
    real: bool = True,
    n_jobs: int = 2,
    real_scores: UtilityScores | None = None,
    column: str | None = None,
    positive_label: Any = None,
) -> dict[str, Any]:
    """Score a run directory and write ``evaluation.json`` into it.

    ``real_scores`` lets a caller that evaluates many runs of one split reuse the reference row.
    ``column``: the categorical column the classifiers predict (the run's target unless named:
    a table trained without one scores the column its user cares about), ``positive_label``
    its positive class (see :func:`utility_task`).
    """
    run_dir = Path(run_dir)
    require_finished(run_dir, "model.json", "synthetic.csv", "run.json")
    config = read_run_config(run_dir)
    require_held_out(config, "evaluation")
    require_finished(run_dir, "test.csv")
    meta = read_json(run_dir / "model.json")
    schema = Schema.from_specs(meta["schema"])
    target = meta["target"]
    scored, positive = utility_task(schema, target, meta["positive_label"], column, positive_label)
    test = schema.read_csv(run_dir / "test.csv")
    synthetic = schema.read_csv(run_dir / "synthetic.csv")
    # First: rebuilding the train split is the step that can fail on bad input.
    real_rows = load_run_tables(config, run_dir, expected=schema)[0]
    if real_scores is None and real:
        real_scores = score_table(real_rows, test, schema, scored, positive, seed, n_jobs)
    result = score_table(synthetic, test, schema, scored, positive, seed, n_jobs).to_dict()
    result["column"], result["positive_label"] = scored, positive
    if real_scores is not None:
        result["real"] = real_scores.to_dict()
    for resolution, key in FIDELITY_KEYS.items():
        result[key] = fidelity_scores(real_rows, synthetic, schema, target, resolution=resolution)
        result[f"{key}_floor"] = fidelity_scores(
            real_rows, test, schema, target, resolution=resolution
        )
    write_json(run_dir / "evaluation.json", result)
    return result


def utility_task(
    schema: Schema, target: str, positive: Any, column: str | None, named: Any
) -> tuple[str, Any]:
    """(column, positive class) the classifiers score: the run's target and positive class,
    or ``column`` (categorical) with ``named``, or else the later of its two levels. (A row
    whose ``column`` is missing counts as not positive.)"""
    if (column is None or column == target) and named is None:
        return target, positive
    column = target if column is None else column
    if column not in schema.names or not isinstance(schema[column], Categorical):
        raise UserInputError(f"column={column} must name a categorical column of the run's schema")
    levels = list(schema[column].levels)
    if named is not None:
        found = matching_class(levels, named)
        if found not in levels:
            raise UserInputError(f"positive_label={named} is not a level of {column!r}")
        return column, found
    if len(levels) != 2:
        raise UserInputError(f"{column!r} has {len(levels)} levels: name one with positive_label=")
    return column, levels[-1]


def fidelity_line(result: dict[str, Any]) -> str:
    """One line: the 1-, 2- and 3-way mean TVDs at each resolution, the held-out real rows'
    in brackets."""
    keys = ("tvd_1way", "tvd_2way", "tvd_3way_target")
    parts = []
    for resolution, key in FIDELITY_KEYS.items():
        scores, floor = result[key], result[f"{key}_floor"]
        mine = "/".join(f"{scores[k]:.3f}" for k in keys)
        floors = "/".join(f"{floor[k]:.3f}" for k in keys)
        parts.append(f"{resolution} bins {mine} ({floors})")
    return "fidelity TVD 1/2/3-way: " + "; ".join(parts) + " (held-out real rows in brackets)"


def evaluate_job(cfg: DictConfig) -> None:
    """The evaluate command: score a run's synthetic rows and print the line."""

    def task() -> None:
        typed = to_typed(cfg, EvaluateConfig)
        result = evaluate_run(
            typed.run_dir,
            typed.seed,
            typed.real,
            typed.n_jobs,
            column=typed.column,
            positive_label=typed.positive_label,
        )
        task_name = f"{result['column']}={result['positive_label']}"
        line = f"{task_name}: synthetic mean AUROC {result['mean']:.4f}"
        if "real" in result:
            line += f"; real {result['real']['mean']:.4f}"
        print(line)
        print(fidelity_line(result))

    guarded(task)


def main() -> None:
    run_in_place("evaluate", evaluate_job, sys.argv[1:])


if __name__ == "__main__":
    main()
