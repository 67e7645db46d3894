"""Writes the raw CSVs in this directory (run it to regenerate them; they are committed).

Each file is a small, messy table as users have them: 300 rows of made-up values with one quirk
each, named after it. ``cases.yaml`` (section ``accepted``) says what ``schema=private`` must
make of each one, and (section ``cases``) which ones it must refuse in one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROWS = 300


def table(rng: np.random.Generator, **columns: list[str]) -> list[list[str]]:
    """Rows drawn from each column's list of raw cells ("" is an empty cell)."""
    picks = {
        name: rng.choice(np.array(cells, dtype=object), ROWS) for name, cells in columns.items()
    }
    return [list(columns), *([picks[n][i] for n in columns] for i in range(ROWS))]


def write(name: str, rows: list[list[str]], sep: str = ",", end: str = "\n", bom: bool = False):
    text = end.join(sep.join(row) for row in rows) + end
    (HERE / name).write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))


def main() -> None:
    rng = np.random.default_rng(12)
    sizes = [str(v) for v in range(20, 40)]
    label = ["yes", "no"]
    write(
        "text_without_candidates.csv",
        table(rng, colour=["red", "green", "blue"], size=sizes, label=label),
    )
    write("all_missing_column.csv", table(rng, empty=[""], size=sizes, label=label))
    write(
        "numbers_and_words.csv",
        table(
            rng,
            mostly_numbers=[*sizes, "unknown"],
            half_words=["1", "2", "many", "few"],
            notes=[""],
            label=label,
        ),
    )
    write("trailing_dot_target.csv", table(rng, size=sizes, label=["yes", "yes.", "no", "no."]))
    write("utf8_bom.csv", table(rng, label=label, size=sizes, colour=["red", "blue"]), bom=True)
    write(
        "semicolon.csv",
        table(rng, size=sizes, colour=["red", "blue"], label=label),
        sep=";",
    )
    write(
        "windows_line_endings.csv",
        table(rng, colour=["red", "blue"], size=sizes, label=label),
        end="\r\n",
    )
    write(
        "quoted_numbers.csv",
        table(rng, size=[f'"{s}"' for s in sizes], colour=['"red"', '"blue"'], label=label),
    )
    write(
        "inf_and_huge_values.csv",
        table(rng, size=[*sizes, "inf", "-inf", "1e308"], colour=["red", "blue"], label=label),
    )
    write("target_all_missing.csv", table(rng, size=sizes, label=[""]))
    write(
        "tokens_and_codes.csv",
        table(
            rng,
            income=[*sizes, *["N"] * 4],  # a census's "not applicable", 1 row in 6
            code=["1", "2"],  # a question coded 1 / 2
            label=label,
        ),
    )
    days = [f"2021-{month:02d}-{day:02d}" for month in range(1, 13) for day in (3, 14, 25)]
    write(
        "dates.csv",
        table(
            rng,
            day=days,  # ISO 8601 dates
            stamp=[f"{d}T{h:02d}:30:00" for d in days[::4] for h in (8, 17)],  # timestamps
            us_day=[f"{d[5:7]}/{d[8:]}/{d[:4]}" for d in days],  # a spreadsheet's m/d/Y
            label=label,
        ),
    )


if __name__ == "__main__":
    main()
