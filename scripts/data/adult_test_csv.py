"""Write UCI's ``adult.test`` as a plain headered CSV with its raw values (issue 12's input).

UCI's file opens with a ``|1x3 Cross validator`` line, separates cells with ", ", writes unknowns
as ``?`` and labels with a trailing dot (``>50K.``). The CSV keeps every value as UCI spells it
(``?`` and the dots stay): only the junk first line goes, the header comes from the public
column names in configs/dataset/adult.yaml, and the space after each comma is dropped.

    python scripts/data/adult_test_csv.py [OUT]   (default: data/derived/adult_test.csv)

Reads from $RDPGAN_DATA_DIR (else ./data). Never commit the output: it is derived data.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import yaml

from rdpgan.data.datasets import data_root
from rdpgan.io import atomic_write

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = Path("data/derived/adult_test.csv")


def write_adult_test_csv(out: Path, root: str | None = None) -> Path:
    """``adult.test`` under the data root, rewritten as a headered CSV at ``out``."""
    names = yaml.safe_load((ROOT / "configs" / "dataset" / "adult.yaml").read_text())[
        "column_names"
    ]
    frame = pd.read_csv(
        data_root(root) / "adult" / "adult.test",
        header=None,
        names=names,
        skiprows=1,
        skipinitialspace=True,
        dtype=str,
        keep_default_na=False,  # "?" stays "?"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(out, lambda tmp: frame.to_csv(tmp, index=False))


if __name__ == "__main__":
    print(write_adult_test_csv(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT))
