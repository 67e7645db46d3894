"""``python -m rdpgan.report run_dir=...``: what a run's privacy guarantee means, and a check.

Writes ``report.md`` and ``privacy_roc.png`` into the run directory:

- the guarantee as a trade-off curve from the run's own ledger and accountant
  (:mod:`rdpgan.privacy.tradeoff`), drawn on ROC axes as the highest true positive rate any
  membership test can reach at each false positive rate, with the CLT mu-GDP curve beside it
  where it applies;
- an empirical membership-inference audit of ``synthetic.csv`` (:mod:`rdpgan.audit`): each
  attack's ROC on the same axes, its AUC and TPR at FPR = 1% and 0.1%;
- the exact-copy rate of training rows in the synthetic table against the held-out baseline.

An attack well above the guarantee's curve would point at a bug in the ledger; an audit of one
run over many rows is evidence, not proof, either way (Steinke et al. 2023).

Beside it, the quality report (:mod:`rdpgan.quality`): ``quality.md`` and its figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from omegaconf import DictConfig

from rdpgan.audit import FPR_TARGETS, AuditResult, audit
from rdpgan.cli import guarded, read_run_config, run_in_place, to_typed
from rdpgan.config import ReportConfig, register_configs
from rdpgan.io import atomic_write, read_json
from rdpgan.privacy.budget import LEDGER_FILE
from rdpgan.privacy.tradeoff import clt_mu, gdp_tradeoff, privacy_profile, tradeoff
from rdpgan.quality import write_quality
from rdpgan.runs import load_run_tables, require_finished, require_held_out
from rdpgan.synthesizer import DPCGAN

matplotlib.use("Agg")
import matplotlib.pyplot as plt

register_configs()

FIGURE = "privacy_roc.png"
ALPHAS = np.concatenate([[0.0], np.logspace(-5, 0, 400)])


def guarantee_tpr(ledger: dict) -> np.ndarray | None:
    """Highest TPR any attack can have at each FPR in ``ALPHAS`` (None: not private)."""
    if ledger["epsilon_spent"] is None:
        return None
    return 1.0 - tradeoff(ALPHAS, privacy_profile(ledger))


def draw(
    path: Path, bound: np.ndarray | None, exact: bool, mu: float | None, result: AuditResult
) -> None:
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    label = "DP guarantee (max TPR of any attack)" if exact else "DP curve (approximate!)"
    for ax, log in zip(axes, (False, True), strict=True):
        if bound is not None:
            ax.plot(ALPHAS, bound, "k-", lw=2, label=label)
        if mu is not None:
            ax.plot(ALPHAS, 1 - gdp_tradeoff(ALPHAS, mu), "k:", label=f"{mu:.2f}-GDP (CLT approx.)")
        for attack in result.attacks:
            ax.plot(attack.fpr, attack.tpr, label=f"{attack.name} (AUC {attack.auc:.3f})")
        ax.plot([1e-5, 1], [1e-5, 1], color="grey", lw=0.8, ls="--", label="chance")
        ax.set_xlabel("false positive rate (type I error)")
        ax.set_ylabel("true positive rate (1 - type II error)")
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(1e-4, 1)
            ax.set_ylim(1e-4, 1)
            ax.set_title("low false positive rates (log-log)")
        else:
            ax.set_title("membership inference: guarantee vs attacks")
    axes[0].legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=120))
    plt.close(figure)


def markdown(ledger: dict, bound: np.ndarray | None, result: AuditResult) -> str:
    spent = ledger["epsilon_spent"]
    lines = [
        "# Privacy report",
        "",
        f"Made by `python -m rdpgan.report` on {pd.Timestamp.now('UTC'):%Y-%m-%d %H:%M} UTC.",
        "",
        "## Guarantee",
        "",
    ]
    if spent is None:
        lines.append("**NOT PRIVATE**: this run was trained without DP; there is no guarantee.")
    else:
        lines.append(
            f"(ε = {spent:.4f}, δ = {ledger['delta']:g})-DP by the `{ledger['accountant']}` "
            f"accountant (target ε = {ledger['epsilon_target']}), composed over: "
            + ", ".join(m["name"] for m in ledger["mechanisms"])
            + "."
        )
    if spent is not None and not ledger["accountant_is_upper_bound"]:
        lines += [
            "",
            f"**Approximate**: the `{ledger['accountant']}` accountant is not an upper bound "
            "(a central-limit approximation), so neither is the curve below.",
        ]
    if not ledger["end_to_end"]:
        lines += ["", *(f"**WARNING**: {note}" for note in ledger["notes"])]
    if bound is not None:
        rows = [
            f"| {alpha:g} | {np.interp(alpha, ALPHAS, bound):.4f} |" for alpha in (0.001, 0.01, 0.1)
        ]
        lines += [
            "",
            "The highest true positive rate any membership test can reach (from the run's",
            "privacy profile, the pointwise best of its (ε(δ), δ) guarantees):",
            "",
            "| false positive rate | max true positive rate |",
            "| ---: | ---: |",
            *rows,
        ]
    lines += [
        "",
        "## Empirical audit",
        "",
        f"{result.members} training rows (members) against {result.non_members} held-out rows "
        "(non-members); the density-ratio attack also sees another half of the held-out rows as "
        f"its population reference. See `{FIGURE}`.",
        "",
        "| attack | AUC | " + " | ".join(f"TPR at FPR={t:g}" for t in FPR_TARGETS) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in FPR_TARGETS) + " |",
    ]
    for attack in result.attacks:
        rates = " | ".join(f"{attack.tpr_at[t]:.4f}" for t in FPR_TARGETS)
        lines.append(f"| {attack.name} | {attack.auc:.4f} | {rates} |")
    lines += [
        "",
        "With this many rows, TPR at FPR=0.1% rests on very few non-members; read it as a rough"
        " indication.",
        "",
        "## Exact copies",
        "",
        f"- synthetic rows identical to a training row: {result.copies_of_train:.4%} "
        "(against an equal number of training rows)",
        f"- synthetic rows identical to a held-out row (chance baseline): "
        f"{result.copies_of_holdout:.4%}",
    ]
    return "\n".join(lines) + "\n"


def write_report(run_dir: str | Path, seed: int = 0) -> AuditResult:
    """Write the privacy report and the quality report of a finished run."""
    run_dir = Path(run_dir)
    require_finished(run_dir, "model.json", LEDGER_FILE, "synthetic.csv", "run.json")
    config = read_run_config(run_dir)
    require_held_out(config, "the privacy audit (members against held-out rows)")
    model = DPCGAN.load(run_dir)
    assert model.transformer is not None
    schema = model.transformer.schema
    train, holdout, _ = load_run_tables(config, run_dir, expected=schema)
    synthetic = schema.read_csv(run_dir / "synthetic.csv")
    result = audit(model.transformer, train, holdout, synthetic, seed)
    ledger = read_json(run_dir / LEDGER_FILE)
    bound = guarantee_tpr(ledger)
    mu = clt_mu(ledger) if bound is not None else None
    draw(run_dir / FIGURE, bound, ledger["accountant_is_upper_bound"], mu, result)
    text = markdown(ledger, bound, result)
    atomic_write(run_dir / "report.md", lambda tmp: tmp.write_text(text))
    write_quality(run_dir, train, holdout, synthetic, schema, model.transformer.target)
    return result


def report_job(cfg: DictConfig) -> None:
    """The report command: write a run's privacy and quality reports."""

    def task() -> None:
        typed = to_typed(cfg, ReportConfig)
        result = write_report(typed.run_dir, typed.seed)
        aucs = ", ".join(f"{a.name} AUC {a.auc:.3f}" for a in result.attacks)
        print(f"wrote {Path(typed.run_dir) / 'report.md'} and quality.md; {aucs}")

    guarded(task)


def main() -> None:
    run_in_place("report", report_job, sys.argv[1:])


if __name__ == "__main__":
    main()
