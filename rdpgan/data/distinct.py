"""Reading a column once per distinct value: a column repeats its values, and reading a cell
(parsing a number or a date, encoding text) costs far more than looking its answer up."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rdpgan.deferred import DeferredModule

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = DeferredModule("pandas")


def per_distinct(
    cells: pd.Series, read: Callable[[pd.Series], np.ndarray], missing: Any
) -> np.ndarray:
    """``read`` of ``cells``' distinct present values (one Series of them, in the order they
    first appear), taken back to every cell; ``missing`` for each missing cell. Each cell gets
    what it gets read alone where ``read`` reads each value on its own and the distinct values
    are told apart as the cells should be (distinct texts are)."""
    codes, distinct = pd.factorize(cells)  # missing: code -1, the entry appended last
    return np.append(read(pd.Series(distinct)), missing)[codes]
