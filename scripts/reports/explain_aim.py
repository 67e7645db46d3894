"""Why the AIM peer scores at chance on a table (issue 28: cervical): rerun one of the
benchmark's AIM cells and say what AIM measured and what its synthetic target carries.

    python scripts/reports/explain_aim.py [--table cervical] [--epsilon 8] [--repeat 0] \
        [--rounds 48]

The cell is rerun as ``scripts/bench/benchmark.py method=aim`` runs it at this commit (the same
split, the same numpy seed of the cell, the same round cap and wrapper, the rows scored after
the same CSV round trip), with every measured clique logged.
Written to ``results/aim_<table>.md``:

- the cliques AIM measured after the 1-way marginals, and which of them hold the target;
- a proxy of what its selection scores: each measured pair's L1 distance (in rows, on AIM's own
  cells) between the train split's joint and the product of its exact 1-way marginals (AIM
  scores the error of its current noisy model, less the noise a measurement would leave),
  beside the target's pairs that score highest;
- how strongly the target goes with each feature (Cramér's V on the public cells) in the
  train split and in AIM's synthetic table: a model that never measured a clique with the
  target can only sample it independently of every feature;
- the 8 classifiers' AUROC on the held-out split, beside the band a score independent of the
  labels falls in there (the Mann-Whitney statistic under independence: mean 0.5, standard
  deviation sqrt((n₊ + n₋ + 1) / (12 n₊ n₋))).

AIM is a benchmark reference (:mod:`marginal_peers`), not part of rdpgan; nothing here chooses
any rdpgan setting.
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
import numpy as np
from bench import marginal_peers  # scripts/, beside this file
from bench.benchmark import BenchmarkConfig, cell_noise_seed, peer_run
from bench.machine_info import code_commit, machine_line

from rdpgan.evaluate import score_table
from rdpgan.fidelity import Cells, cramers_v
from rdpgan.io import atomic_write

REPO = Path(__file__).resolve().parents[2]
MEASURED = re.compile(r"measured columns \(([\d, ]+)\)")


def chance_sd(positives: int, negatives: int) -> float:
    """The standard deviation of AUROC for a score independent of the labels."""
    return math.sqrt((positives + negatives + 1) / (12.0 * positives * negatives))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="cervical")
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--repeat", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=marginal_peers.DEFAULT_AIM_ROUNDS)
    args = parser.parse_args()
    commit, machine = code_commit(), machine_line()
    command = shlex.join(["python", "scripts/reports/explain_aim.py", *sys.argv[1:]])
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    cell = BenchmarkConfig(
        table=args.table, method="aim", epsilon=args.epsilon, aim_rounds=args.rounds
    )
    seed = cell_noise_seed(cell, args.repeat)
    log: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:  # run and read back as the benchmark does
        table, train, test, synthetic, peer, _ = peer_run(
            cell, args.repeat, Path(scratch), log.append
        )
    names = table.schema.names
    label = names.index(table.target)
    cliques = [tuple(int(i) for i in m.group(1).split(",")) for m in map(MEASURED.search, log) if m]
    with_target = [c for c in cliques if label in c]

    peer_codes, peer_sizes = marginal_peers.encode(table.schema, train)

    def independence_error(pair: tuple[int, ...]) -> float:
        joint = marginal_peers._counts(peer_codes, peer_sizes, pair)
        joint = joint.reshape(peer_sizes[pair[0]], peer_sizes[pair[1]])
        expected = np.outer(joint.sum(1), joint.sum(0)) / joint.sum()
        return float(np.abs(joint - expected).sum())

    target_pairs = sorted(
        (
            (independence_error(tuple(sorted((label, i)))), names[i])
            for i in range(len(names))
            if i != label
        ),
        reverse=True,
    )
    measured_errors = [
        (independence_error(c), tuple(names[i] for i in c)) for c in cliques if len(c) == 2
    ]

    cells = Cells.build("public", table.schema, train)
    real_codes, synthetic_codes = cells.codes(train), cells.codes(synthetic)
    association = sorted(
        (
            (
                cramers_v(real_codes, cells.sizes, label, i),
                cramers_v(synthetic_codes, cells.sizes, label, i),
                names[i],
            )
            for i in range(len(names))
            if i != label
        ),
        reverse=True,
    )
    scores = score_table(synthetic, test, table.schema, table.target, table.positive_label, 0)
    positives = int((test[table.target] == table.positive_label).sum())
    sd = chance_sd(positives, len(test) - positives)
    synthetic_positives = int((synthetic[table.target] == table.positive_label).sum())

    lines = [
        f"# AIM on {args.table} at ε = {args.epsilon:g}, repeat {args.repeat}",
        "",
        f"Made by `{command}` on {date}, commit {commit}, machine {machine}. The cell of "
        f"`scripts/bench/benchmark.py table={args.table} method=aim epsilon={args.epsilon:g}` "
        f"rerun with its own numpy seed ({seed}) and round cap ({args.rounds}).",
        "",
        f"- **Rounds:** {peer.rounds_run} select-measure rounds after the "
        f"{len(names)} 1-way marginals; ρ spent {peer.rho_spent:.4f} of {peer.rho:.4f}.",
        f"- **Cliques measured:** {', '.join(str(tuple(names[i] for i in c)) for c in cliques)}.",
        f"- **Cliques with the target `{table.target}`:** "
        + (", ".join(str(tuple(names[i] for i in c)) for c in with_target) or "**none**")
        + ".",
        f"- **AUROC of the 8 classifiers** (trained on AIM's rows, tested on the {len(test)} "
        f"held-out rows, {positives} positive): mean {scores.mean:.3f}; per classifier "
        + ", ".join(f"{k} {v:.3f}" for k, v in scores.auroc.items())
        + ".",
        f"- **Chance band:** a score independent of the labels has AUROC 0.5 ± {sd:.3f} "
        f"(one standard deviation) on this test split; the mean above is "
        f"{(scores.mean - 0.5) / sd:+.1f} of them from 0.5.",
        f"- **Synthetic positives:** {synthetic_positives} of {len(synthetic)} rows "
        f"(train: {int((train[table.target] == table.positive_label).sum())} of {len(train)}).",
        "",
        "## A proxy of AIM's selection score: the exact 1-way model's L1 error on a pair, in rows",
        "",
        "| pair | measured | error |",
        "| --- | --- | ---: |",
        *(f"| {' × '.join(pair)} | yes | {error:.0f} |" for error, pair in measured_errors),
        *(f"| {table.target} × {name} | no | {error:.0f} |" for error, name in target_pairs[:5]),
        "",
        "## The target's association with each feature (Cramér's V, public cells)",
        "",
        "| feature | train split | AIM's rows |",
        "| --- | ---: | ---: |",
        *(f"| {name} | {real:.3f} | {fake:.3f} |" for real, fake, name in association),
        "",
    ]
    out = REPO / "results" / f"aim_{args.table}.md"
    atomic_write(out, lambda tmp: Path(tmp).write_text("\n".join(lines)))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
