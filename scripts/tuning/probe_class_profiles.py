"""How much class signal the released per-class profiles keep, by their resolution (issue 28:
small tables; issue 26: ε = 1). A probe for a rule, not a setting.

    python scripts/tuning/probe_class_profiles.py [--reps 10]

On Adult's validation split of its train split only (the test split is never read), for a
table of Adult's train rows (all of them, or a cervical-sized subsample of 700 rows, 45
positive): each feature's [class, code] count table gets Gaussian noise of the standard
deviation a default run's ledger gives its ``marginals`` release (read off a default fit of
that table at that ε, one DP-SGD step long: the releases come before training), and is made
per-class distributions as :func:`rdpgan.measure.conditional_distributions` makes them.
Scored by the AUROC, on the validation rows, of the naive Bayes classifier those profiles
define (a proxy for the class signal the generator is taught), at three resolutions of the
numeric columns:

- ``fine``: G's codes (one per integer value, 40 bins of a wide column): today's release;
- ``pooled within``: the same release, post-processed (free): each class's profile summed into
  the coarse cells and made a distribution there, spread within each coarse cell as the pooled
  table spreads it;
- ``coarse``: the counts released at the coarse cells instead (the same noise per cell: each
  row still adds one count to one cell of each table).

Noise-free profiles at each resolution are the ceiling. Written to
``results/class_profiles.md``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line
from sklearn.metrics import roc_auc_score

from rdpgan.cli import compose_run_config
from rdpgan.config import TrainConfig
from rdpgan.data.loading import Table, load_split
from rdpgan.data.split import VALIDATION_KEY, split
from rdpgan.io import atomic_write
from rdpgan.measure import conditional_distributions, marginal_counts
from rdpgan.synthesizer import DPCGAN
from rdpgan.transform import TableTransformer
from tuning.tune_adult import subsample

REPO = Path(__file__).resolve().parents[2]
# (rows, positives, ε): rows None is the whole train split.
SETTINGS = ((700, 45, 8.0), (700, 45, 1.0), (None, None, 8.0), (None, None, 1.0))
COARSE_CELLS = (6, 20)
FLOOR = 1e-4  # a profile's probability floor in the naive Bayes score


def marginals_noise(frame: pd.DataFrame, table: Table, epsilon: float) -> float:
    """The noise std on one count of the ``marginals`` release of a default fit of ``frame``
    at ``epsilon`` (its ledger's noise multiplier times the release's sensitivity)."""
    model = DPCGAN(epsilon=epsilon, train=TrainConfig(steps=1, progress=False), device="cpu")
    model.fit(frame, table.target, table.schema, table.positive_label)
    release = model.ledger.find("marginals")
    return float(release.noise_multiplier * release.details["sensitivity"])


def naive_bayes_auroc(profiles: list[np.ndarray], codes: np.ndarray, labels: np.ndarray) -> float:
    """AUROC of log p(x | 1) - log p(x | 0), features independent given the class."""
    score = np.zeros(len(codes))
    for i, profile in enumerate(profiles):
        cells = np.maximum(profile[:, codes[:, i]], FLOOR)
        score += np.log(cells[1]) - np.log(cells[0])
    return float(roc_auc_score(labels, score))


def pooled_within(noisy: np.ndarray, noise_std: float, cells: np.ndarray) -> np.ndarray:
    """Fine noisy [class, code] counts as per-class distributions over the coarse ``cells``
    (each code's coarse cell), spread within each coarse cell as the pooled counts are."""
    size = int(cells.max()) + 1
    summed = np.stack([np.bincount(cells, weights=row, minlength=size) for row in noisy])
    per_cell = np.bincount(cells, minlength=size)
    coarse = conditional_distributions(summed, noise_std * np.sqrt(per_cell.mean()))
    pooled = np.clip(noisy.sum(axis=0), 0.0, None)
    pooled = pooled / max(pooled.sum(), 1e-12)
    share = np.bincount(cells, weights=pooled, minlength=size)[cells]
    within = np.where(share > 0, pooled / np.maximum(share, 1e-12), 1.0 / per_cell[cells])
    return coarse[:, cells] * within


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    commit, machine = code_commit(), machine_line()
    command = shlex.join(["python", "scripts/tuning/probe_class_profiles.py", *sys.argv[1:]])
    table, train_rows, _test_never_read = load_split(compose_run_config(["dataset=adult"]).dataset)
    fit_rows, validation = split(train_rows, 0.2, VALIDATION_KEY)
    transformer = TableTransformer(table.schema, table.target)
    valid_codes = transformer.codes(transformer.encode(validation))
    valid_labels = transformer.encode_labels(validation)
    header = ["rows", "ε", "noise std", "fine"]
    for cells in COARSE_CELLS:
        header += [f"pooled within {cells}", f"coarse {cells}"]
    lines = ["| " + " | ".join(header) + " |", "|" + " ---: |" * len(header)]
    ceiling = []
    for rows, positives, epsilon in SETTINGS:
        frame = fit_rows if rows is None else subsample(fit_rows, table, rows, positives)
        noise = marginals_noise(frame, table, epsilon)
        codes = transformer.codes(transformer.encode(frame))
        labels = transformer.encode_labels(frame)
        fine = marginal_counts(codes, labels, transformer.code_sizes, 2)
        rng = np.random.default_rng(0)
        scores: dict[str, list[float]] = defaultdict(list)

        exact = {
            "fine": naive_bayes_auroc(
                [t / t.sum(1, keepdims=True) for t in fine], valid_codes, valid_labels
            )
        }
        for _ in range(args.reps):
            noisy = [t + rng.normal(0.0, noise, t.shape) for t in fine]
            profiles = [conditional_distributions(t, noise) for t in noisy]
            scores["fine"].append(naive_bayes_auroc(profiles, valid_codes, valid_labels))
        for cells in COARSE_CELLS:
            maps = transformer.coarse_maps(cells)
            coarse = [
                np.stack([np.bincount(m, weights=row, minlength=int(m.max()) + 1) for row in t])
                for t, m in zip(fine, maps, strict=True)
            ]
            spread = [c[:, m] / np.bincount(m)[m] for c, m in zip(coarse, maps, strict=True)]
            exact[f"coarse {cells}"] = naive_bayes_auroc(
                [s / s.sum(1, keepdims=True) for s in spread], valid_codes, valid_labels
            )
            for _ in range(args.reps):
                noisy_fine = [t + rng.normal(0.0, noise, t.shape) for t in fine]
                profiles = [
                    pooled_within(t, noise, m) for t, m in zip(noisy_fine, maps, strict=True)
                ]
                scores[f"pooled within {cells}"].append(
                    naive_bayes_auroc(profiles, valid_codes, valid_labels)
                )
                released = [
                    conditional_distributions(c + rng.normal(0.0, noise, c.shape), noise)
                    for c in coarse
                ]
                profiles = [r[:, m] for r, m in zip(released, maps, strict=True)]
                scores[f"coarse {cells}"].append(
                    naive_bayes_auroc(profiles, valid_codes, valid_labels)
                )
        size = "all" if rows is None else f"{rows} ({positives} positive)"
        row = [size, f"{epsilon:g}", f"{noise:.1f}"]
        row += [
            f"{np.mean(scores[name]):.3f} ± {np.std(scores[name], ddof=1):.3f}"
            for name in header[3:]
        ]
        lines.append("| " + " | ".join(row) + " |")
        ceiling_row = (
            f"| no noise, {size} | – | 0 | {exact['fine']:.3f} | "
            + " | ".join(f"– | {exact[f'coarse {c}']:.3f}" for c in COARSE_CELLS)
            + " |"
        )
        if ceiling_row not in ceiling:  # one per table size
            ceiling.append(ceiling_row)
        print(lines[-1], flush=True)
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = [
        "# Class signal of the released per-class profiles, by resolution",
        "",
        f"Made by `{command}` on {date}, commit {commit}, machine {machine}. Naive-Bayes AUROC"
        f" on Adult's validation split (mean ± std over {args.reps} noise draws); how it is"
        " made: the script's docstring.",
        "",
        *lines,
        *ceiling,
        "",
    ]
    out = REPO / "results" / "class_profiles.md"
    atomic_write(out, lambda tmp: Path(tmp).write_text("\n".join(text)))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
