"""A module imported at its first use, not where it is named: writing a saved model's rows to a
file goes through Arrow alone, and importing pandas was a third of ``python -m rdpgan.sample
n=1000`` (issue 54). Modules on that path name pandas as

    if TYPE_CHECKING:
        import pandas as pd
    else:
        pd = DeferredModule("pandas")

and read ``pd.DataFrame`` as before; a type checker sees pandas itself."""

from __future__ import annotations

import importlib
from typing import Any


class DeferredModule:
    """Stands for the module ``name`` and imports it at the first attribute read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<deferred module {self._name!r}>"
