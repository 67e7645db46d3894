"""Where a table's 1-way TVD comes from (issue 26: ames): G's rows, or the marginals they follow.

    python scripts/explain_marginals.py [--table ames] [--epsilon 8] [--seeds 0 1]

A default run is fitted on the validation split of the table's *train* split (as
``tune_fidelity.py`` fits; its test split is never read), and each feature column is scored
at G's own codes (its levels; a numeric column's bins, point masses and "missing"), 1-way TVD
against the rows it was fitted on, of:

- the released marginals G and the sampler match: each class's released distribution, weighted
  by the released label shares (what the tilt aims every column at);
- G's sampled rows, encoded back to the same codes.

Where the two are alike, G follows the release and what is left is the release's noise (the
ledger's std per count and class, beside); where G's rows are further, training or sampling
lose what was released. Written to ``results/marginals_<table>.md``, with how it was made.
Diagnostic only: nothing here chooses any setting.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from machine_info import code_commit, machine_line
from tune_fidelity import TABLES, fitted, validation_run

from rdpgan.data.schema import Categorical
from rdpgan.io import atomic_write

REPO = Path(__file__).resolve().parent.parent


def tvd(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a / a.sum() - b / b.sum()).sum())


def column_scores(table: str, epsilon: float, seed: int) -> tuple[dict[str, tuple], float]:
    """Per feature column (kind, codes, TVD of the released marginals, TVD of G's rows), and
    the ledger's noise std per released count of the marginals."""
    cfg, schema_table, fit_rows, _validation_never_scored = validation_run(table, epsilon, seed, [])
    model = fitted(cfg, fit_rows, schema_table, seed)
    sampler = model.sampler
    transformer, marginals = sampler.transformer, sampler.marginals
    assert marginals is not None, "a run without marginals has nothing to explain"
    synthetic = model.sample(len(fit_rows))
    real = transformer.codes(transformer.encode(fit_rows))
    generated = transformer.codes(transformer.encode(synthetic))
    label_probs = np.asarray(sampler.label_probs)
    scores = {}
    for i, column in enumerate(transformer.features.columns):
        size = transformer.code_sizes[i]
        released = label_probs @ marginals.by_class[i]
        counts = np.bincount(real[:, i], minlength=size).astype(float)
        ours = np.bincount(generated[:, i], minlength=size).astype(float)
        kind = "categorical" if isinstance(column, Categorical) else "numeric"
        scores[column.name] = (kind, size, tvd(counts, released), tvd(counts, ours))
    return scores, float(sampler.marginal_noise)


def report(runs: list[tuple[dict[str, tuple], float]]) -> str:
    """The Markdown of ``runs`` (one per seed): per kind of column, then per column."""
    names = list(runs[0][0])
    mean = {n: np.mean([[r[0][n][2], r[0][n][3]] for r in runs], axis=0) for n in names}
    lines = [
        f"Ledger's noise std per released count and class of the marginals: "
        f"{', '.join(f'{noise:.2f}' for _, noise in runs)} (one per seed).",
        "",
        "| columns | count | released marginals' 1-way TVD | G's rows' 1-way TVD |",
        "| --- | ---: | ---: | ---: |",
    ]
    for kind in ("categorical", "numeric", None):
        chosen = [n for n in names if kind is None or runs[0][0][n][0] == kind]
        if chosen:
            released, ours = np.mean([mean[n] for n in chosen], axis=0)
            label = kind or "all"
            lines.append(f"| {label} | {len(chosen)} | {released:.4f} | {ours:.4f} |")
    lines += [
        "",
        "| column | kind | codes | released marginals | G's rows |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for n in sorted(names, key=lambda n: -mean[n][1]):
        kind, size = runs[0][0][n][:2]
        lines.append(f"| {n} | {kind} | {size} | {mean[n][0]:.4f} | {mean[n][1]:.4f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=TABLES, default="ames")
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    commit, machine = code_commit(), machine_line()
    command = shlex.join(["python", "scripts/explain_marginals.py", *sys.argv[1:]])
    runs = [column_scores(args.table, args.epsilon, seed) for seed in args.seeds]
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join(
        [
            f"# Where the 1-way TVD of {args.table} comes from, at ε = {args.epsilon:g}",
            "",
            f"Made by `{command}` at commit {commit} on {date}, seeds "
            f"{', '.join(map(str, args.seeds))} (the DP noise is fresh OS entropy).",
            f"Machine: {machine}.",
            "",
            "A default run fitted on the validation split of the table's train split; 1-way TVD "
            "against the rows it was fitted on, at G's own codes, of the released marginals "
            "(each class's released distribution weighted by the released label shares) and "
            "of G's sampled rows (as many), mean over the seeds. See the script's docstring.",
            "",
            report(runs),
            "",
        ]
    )
    out = REPO / "results" / f"marginals_{args.table}.md"
    atomic_write(out, lambda tmp: tmp.write_text(text))
    print(text)


if __name__ == "__main__":
    main()
