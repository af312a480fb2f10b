"""Costs summed exactly. Polars adds floats chunk by chunk and thread by thread, so the last digits of its sums
hang on how the rows were split (a dataset's files, a frame's chunks), on the order a join or group_by gave them
and on the run; math.fsum gives the float nearest the true sum whatever the order, so cache-report, its rollups
and `audit query` give the same bytes over the same calls on every run."""

from __future__ import annotations

import math
from collections.abc import Iterable

import polars as pl


def exact_sums(frame: pl.DataFrame, names: Iterable[str], *, empty: float | None = 0.0) -> pl.DataFrame:
    """`frame` with each column of `names`, a list of a row's costs, replaced by their exact sum: `empty` for an
    empty list (no cost), null for a null one."""
    return frame.with_columns(
        pl.Series(name, [None if costs is None else math.fsum(costs) if costs else empty
                         for costs in frame[name].to_list()], pl.Float64) for name in names)
