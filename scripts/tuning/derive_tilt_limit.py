"""Derive ``TILT_NOISE_LIMIT`` from Adult's validation rounds alone.

    python scripts/tuning/derive_tilt_limit.py

The rule (written down after these figures had been seen: the limit's first placement quoted
them; what it fixes is that only Adult's validation rows are read): for each Adult
validation cell of round 20 of ``results/tuning_adult.csv`` (ε and table size; 4 seeds
each, tilted and untilted models), take the noise on one released count as a share of the
released rows at the split those rounds ran with (``results/noise_shares.csv``, its
``validation`` rows, Adult only, column ``share_configured_split``: the rounds ran before the
adaptive pairs' share could move to the marginals; since round 36 of
``tuning_fidelity.csv`` the 700-row tables release no pairs, so their share there is the
rule's, about 0.006 where round 20 ran at 0.0112, still a share where the tilt did not
help; the limit reads only the shares either side of it, which the rule leaves alone up to
the third digit that the noisy released row counts move from run to run. With the adaptive
share moved, as a fit now releases them, those tables' share is about 0.0043, at the limit,
so whether they tilt turns with the noise of their released row count; whether the tilt
helps at that noise was not measured), and
whether the tilt lowered the mean of the 1-, 2- and 3-way-with-target TVD. The limit is the
geometric mean of the largest share at which the tilt helped and the smallest share above it
at which it did not, rounded to two significant digits. No cervical, credit-card or
test-split figure is read. The figures come from the validation rows of the stratified split
rdpgan used before the per-row split (the CSVs were not made again).

Writes ``results/tilt_limit.md``; ``tests/test_postprocess.py`` checks that the constant in
``rdpgan.synthesizer`` is what this rule gives on the committed CSVs.
"""

from __future__ import annotations

import math
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line

RESULTS = Path(__file__).resolve().parents[2] / "results"
TVD = ["tvd_1way", "tvd_2way", "tvd_3way_target"]


def tilt_cells(tuning: pd.DataFrame, shares: pd.DataFrame) -> pd.DataFrame:
    """Per Adult validation cell: its noise share and the tilt's change of mean TVD."""
    rounds = tuning[tuning["name"].isin(["r20_tilted", "r20_untilted"])].copy()
    rounds["rows"] = rounds["rows"].fillna(0).astype(int)  # 0: the whole validation protocol
    rounds["tvd"] = rounds[TVD].mean(axis=1)
    means = rounds.pivot_table(index=["epsilon", "rows"], columns="name", values="tvd")
    adult = shares[(shares["protocol"] == "validation") & (shares["dataset"] == "adult")].copy()
    # noise_shares lists the whole protocol by its row count; tuning by an empty size.
    sizes = set(rounds["rows"]) - {0}
    adult["rows"] = adult["rows"].where(adult["rows"].isin(sizes), 0)
    share = adult.set_index(["epsilon", "rows"])["share_configured_split"]
    cells = pd.DataFrame(
        {
            "share": share.reindex(means.index),
            "tvd_untilted": means["r20_untilted"],
            "tvd_tilted": means["r20_tilted"],
        }
    )
    cells["tilt_helped"] = cells["tvd_tilted"] < cells["tvd_untilted"]
    return cells.sort_values("share")


def derived_limit(cells: pd.DataFrame) -> float:
    """The geometric mean of the largest helped share and the next share that did not help,
    to two significant digits."""
    helped = cells.loc[cells["tilt_helped"], "share"].max()
    above = cells.loc[(~cells["tilt_helped"]) & (cells["share"] > helped), "share"].min()
    limit = math.sqrt(helped * above)
    return float(f"{limit:.2g}")


def load() -> pd.DataFrame:
    return tilt_cells(
        pd.read_csv(RESULTS / "tuning_adult.csv"), pd.read_csv(RESULTS / "noise_shares.csv")
    )


def main() -> None:
    cells = load()
    limit = derived_limit(cells)
    command = "python " + shlex.join(["scripts/tuning/derive_tilt_limit.py", *sys.argv[1:]])
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = cells.reset_index()
    table = "\n".join(
        [
            "| ε | rows | noise share | mean TVD untilted | tilted | tilt helped |",
            "| ---: | ---: | ---: | ---: | ---: | --- |",
            *(
                f"| {r.epsilon:g} | {r.rows} | {r.share:.3g} | {r.tvd_untilted:.4f} | "
                f"{r.tvd_tilted:.4f} | {'yes' if r.tilt_helped else 'no'} |"
                for r in rows.itertuples()
            ),
        ]
    )
    text = (
        "# The tilt's noise limit, from Adult's validation rounds alone\n\n"
        f"Made by `{command}` on {date} at {code_commit()} ({machine_line()}) from "
        "`results/tuning_adult.csv` (round 20) and the "
        "`validation` rows of `results/noise_shares.csv` (Adult only; rows 0 = the whole "
        "validation protocol). No seed: it reads committed figures.\n\n"
        f"{table}\n\n"
        f"Limit: the geometric mean of the largest share where the tilt lowered mean TVD and "
        f"the next larger share where it did not: **{limit:g}** (`TILT_NOISE_LIMIT`).\n"
    )
    (RESULTS / "tilt_limit.md").write_text(text)
    print(f"TILT_NOISE_LIMIT = {limit:g}")


if __name__ == "__main__":
    main()
