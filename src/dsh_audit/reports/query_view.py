"""`audit query`'s table: any answer's columns in order, fitted to the terminal (the last ones give way first,
but the money and the ratios);
costs in USD, ratios in percent, counts grouped."""

from __future__ import annotations

from typing import Any

import polars as pl

from .views import Column, Terminal, count, percent, table, usd


def _cell(name: str, dtype: pl.DataType) -> Any:
    def shown(row: dict[str, Any]) -> str:
        value = row[name]
        if value is None:
            return "-"
        if name.endswith("Usd"):
            return usd(value)
        if name.endswith("Ratio"):
            return percent(value)
        if dtype.is_integer():
            return count(value)
        return str(value)
    return shown


def render(answer: pl.DataFrame, term: Terminal, *, wide: bool) -> str:
    """The answer as a table; one row (the totals) as a column of names and values."""
    if answer.height == 1:
        [row] = answer.to_dicts()
        pairs = [{"name": name, "value": _cell(name, dtype)(row)} for name, dtype in answer.schema.items()]
        shown = [Column("", lambda pair: str(pair["name"])), Column("", lambda pair: str(pair["value"]), squeeze=True)]
        return "\n".join(table(pairs, shown, width=term.width, wide=wide)[1:]) + "\n"
    # the group, the money (waste and breaks are ranked by what was lost) and the hit ratio are kept longest; the
    # other columns give way from the last, then text is cut (a project's path at its start: its end names it)
    columns = [Column(name, _cell(name, dtype), rank=0 if name.endswith(("Usd", "Ratio")) else k,
                      right=dtype.is_numeric(), squeeze=dtype == pl.String, keep_end=name == "project")
               for k, (name, dtype) in enumerate(answer.schema.items())]
    return "\n".join(table(answer.to_dicts(), columns, width=term.width, wide=wide)) + "\n"
