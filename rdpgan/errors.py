"""The one exception type that means "the user gave us something we cannot use".

Entry points turn it into a one-line message and exit code 2; anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations


class UserInputError(ValueError):
    """Bad input from the user: a missing file, an unknown column, an impossible budget."""


def first_line(exc: BaseException) -> str:
    """An exception as one line of a user-facing message."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
