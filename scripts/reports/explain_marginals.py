"""Where a table's 1-way TVD comes from (issue 26: ames): G's rows, the marginals they follow, or
the positions within G's bins; and AIM's, column by column, on the same rows.

    python scripts/reports/explain_marginals.py [--table ames] [--epsilon 8] [--seeds 0 1] \
        [--aim-rounds 80]

A default run is fitted on the validation split of the table's *train* split (as
``tune_fidelity.py`` fits; its test split is never read), and each feature column is scored
at G's own codes (its levels; a numeric column's bins, point masses and "missing"), 1-way TVD
against the rows it was fitted on, of:

- the released marginals G and the sampler match: each class's released distribution, weighted
  by the released label shares (what the tilt aims every column at);
- G's sampled rows, encoded back to the same codes.

Where the two are alike, G follows the release and what is left is the release's noise (the
ledger's std per count and class, beside); where G's rows are further, training or sampling
lose what was released.

Then at the data's resolution (the fidelity metric's 20 quantile bins of the rows fitted on),
1-way TVD against those rows of:

- the positions' floor: the fitted rows' own codes, decoded with within-bin positions drawn as
  sampling draws them (what the positions alone lose, with every code right);
- G's sampled rows;
- AIM's rows (``scripts/bench/marginal_peers.py``, capped at ``--aim-rounds`` rounds as the
  benchmark caps it; 0 skips it), fitted on the same rows at the same ε, its reference noise
  seeded by the seed.

Written to ``results/marginals_<table>.md``, with how it was made. Diagnostic only: nothing here
chooses any setting.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
import numpy as np
from bench import marginal_peers  # scripts/, beside this file
from bench.machine_info import code_commit, machine_line
from tuning.tune_fidelity import TABLES, fitted, validation_run

from rdpgan.data.schema import Categorical
from rdpgan.fidelity import per_column_tvd
from rdpgan.io import atomic_write

REPO = Path(__file__).resolve().parents[2]


def tvd(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a / a.sum() - b / b.sum()).sum())


def column_scores(
    table: str, epsilon: float, seed: int, aim_rounds: int
) -> tuple[dict[str, tuple], float]:
    """Per feature column (kind, codes, then 1-way TVDs: at G's codes, of the released marginals
    and of G's rows; at the quantile bins, of the positions' floor, of G's rows and of AIM's,
    NaN without AIM), and the ledger's noise std per released count of the marginals."""
    cfg, schema_table, fit_rows, _validation_never_scored = validation_run(table, epsilon, seed, [])
    model = fitted(cfg, fit_rows, schema_table, seed)
    sampler = model.sampler
    transformer, marginals = sampler.transformer, sampler.marginals
    assert marginals is not None, "a run without marginals has nothing to explain"
    synthetic = model.sample(len(fit_rows))
    real = transformer.codes(transformer.encode(fit_rows))
    generated = transformer.codes(transformer.encode(synthetic))
    # The fitted rows' own codes, each wide column's position drawn as Sampler.parts draws it.
    rng = np.random.default_rng(seed)
    positions = rng.uniform(-1.0, 1.0, (len(fit_rows), len(transformer.wide_columns)))
    floor = transformer.decode_parts(positions, real, transformer.encode_labels(fit_rows))
    schema = schema_table.schema
    at_quantiles = [
        per_column_tvd(fit_rows, rows, schema, resolution="quantile") for rows in (floor, synthetic)
    ]
    if aim_rounds > 0:
        aim_rows, _ = marginal_peers.synthesize(
            "aim", schema, fit_rows, epsilon, cfg.delta, rng, rounds=aim_rounds
        )
        at_quantiles.append(per_column_tvd(fit_rows, aim_rows, schema, resolution="quantile"))
    label_probs = np.asarray(sampler.label_probs)
    scores = {}
    for i, column in enumerate(transformer.features.columns):
        size = transformer.code_sizes[i]
        released = label_probs @ marginals.by_class[i]
        counts = np.bincount(real[:, i], minlength=size).astype(float)
        ours = np.bincount(generated[:, i], minlength=size).astype(float)
        kind = "categorical" if isinstance(column, Categorical) else "numeric"
        quantile = [tvds[column.name] for tvds in at_quantiles] + [np.nan] * (3 - len(at_quantiles))
        scores[column.name] = (kind, size, tvd(counts, released), tvd(counts, ours), *quantile)
    return scores, float(sampler.marginal_noise)


HEADINGS = (
    "released marginals (G's codes)",
    "G's rows (G's codes)",
    "positions' floor (quantile bins)",
    "G's rows (quantile bins)",
    "AIM's rows (quantile bins)",
)


def report(runs: list[tuple[dict[str, tuple], float]]) -> str:
    """The Markdown of ``runs`` (one per seed): per kind of column, then per column."""
    names = list(runs[0][0])
    mean = {n: np.mean([r[0][n][2:] for r in runs], axis=0) for n in names}

    def cells(values: np.ndarray) -> str:
        return " | ".join("—" if np.isnan(v) else f"{v:.4f}" for v in values)

    lines = [
        f"Ledger's noise std per released count and class of the marginals: "
        f"{', '.join(f'{noise:.2f}' for _, noise in runs)} (one per seed).",
        "",
        f"| columns | count | {' | '.join(HEADINGS)} |",
        "| --- | ---: |" + " ---: |" * len(HEADINGS),
    ]
    for kind in ("categorical", "numeric", None):
        chosen = [n for n in names if kind is None or runs[0][0][n][0] == kind]
        if chosen:
            label = kind or "all"
            values = np.mean([mean[n] for n in chosen], axis=0)
            lines.append(f"| {label} | {len(chosen)} | {cells(values)} |")
    lines += [
        "",
        f"| column | kind | codes | {' | '.join(HEADINGS)} |",
        "| --- | --- | ---: |" + " ---: |" * len(HEADINGS),
    ]
    for n in sorted(names, key=lambda n: -mean[n][3]):
        kind, size = runs[0][0][n][:2]
        lines.append(f"| {n} | {kind} | {size} | {cells(mean[n])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=TABLES, default="ames")
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--aim-rounds", type=int, default=80, help="AIM's round cap (0: no AIM)")
    args = parser.parse_args()
    commit, machine = code_commit(), machine_line()
    command = shlex.join(["python", "scripts/reports/explain_marginals.py", *sys.argv[1:]])
    runs = [column_scores(args.table, args.epsilon, seed, args.aim_rounds) for seed in args.seeds]
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
            "of G's sampled rows (as many); then at the fidelity metric's 20 quantile bins of "
            "those rows, of the positions' floor (their own codes, positions drawn as sampling "
            "draws them), of G's rows and of AIM's rows fitted on the same rows "
            f"({args.aim_rounds} rounds at most; — where not run); mean over the seeds. "
            "See the script's docstring.",
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
