"""Plain containers the facade returns for rows and the store's status: a list and a dict of their own types,
so a notebook can show them as tables (`rag_core.render.jupyter` registers the look) and `to_pandas()`
makes a DataFrame; every other surface reads them as the plain list and dict they are."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, TypeVar

if TYPE_CHECKING:
    import pandas as pd

Row = TypeVar("Row", bound=Mapping[str, Any])


class Records(list[Row]):
    """A list of row dicts (documents, query-log entries) that becomes a DataFrame."""

    def to_pandas(self) -> "pd.DataFrame":
        import pandas as pd

        return pd.DataFrame(list(self))


class StoreStatus(dict):  # type: ignore[type-arg]
    """`Workbench.status()`: the dict every surface reads, shown as a two-column table in Jupyter."""
