"""What a budget and an accountant's name must be, checked without loading an accountant: a
saved model is loaded and sampled without Opacus or the accounting code."""

from __future__ import annotations

import math

from rdpgan.errors import UserInputError

# The accountants a run can name (rdpgan.privacy.accountants), and the name of no privacy.
ACCOUNTANTS = ("rdp", "moments", "prv", "gdp")
NON_PRIVATE = "none"
LEDGER_FILE = "privacy.json"  # a run directory's ledger


def validate_budget(epsilon: float, delta: float, n_rows: float | None = None) -> None:
    """Reject budgets no statistician would sign: epsilon <= 0, delta outside (0, 1/n)."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise UserInputError(f"epsilon must be a positive number, got {epsilon}")
    if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
        raise UserInputError(f"delta must be in (0, 1), got {delta}")
    if n_rows is not None and delta >= 1.0 / max(n_rows, 1.0):
        raise UserInputError(
            f"delta={delta} is not below 1/n for this table's training rows; a delta that large "
            "allows publishing a row outright (the row count is not shown: it is private)"
        )


def check_accountant(accountant: str) -> None:
    if accountant != NON_PRIVATE and accountant not in ACCOUNTANTS:
        raise UserInputError(
            f"unknown accountant {accountant!r}; choose from "
            f"{', '.join((*ACCOUNTANTS, NON_PRIVATE))}"
        )
