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
from types import ModuleType
from typing import Any


class DeferredModule:
    """Stands for the module ``name`` and imports it at the first attribute read (then keeps
    it: a read costs a method call, not an import's lookups)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        # (Its own fields, and the protocols copy and pickle probe for, are not the module's:
        # looked up here they would recurse before __init__ has run.)
        if attribute in ("_name", "_module") or attribute.startswith("__"):
            raise AttributeError(attribute)
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)

    def __reduce__(self) -> tuple[type, tuple[str]]:
        """Copied or pickled as a new stand-in for the same name (a module does not pickle)."""
        return DeferredModule, (self._name,)

    def __repr__(self) -> str:
        return f"<deferred module {self._name!r}>"
