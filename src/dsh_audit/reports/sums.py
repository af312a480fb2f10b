"""Costs summed exactly. Polars adds floats chunk by chunk and thread by thread, so the last digits of its sums
hang on how the rows were split (a dataset's files, a frame's chunks), on the order a join or group_by gave them
and on the run; math.fsum gives the float nearest the true sum whatever the order, so cache-report, its rollups
and `audit query` give the same bytes over the same calls on every run."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import polars as pl


def exact_sum(costs: Sequence[float] | None, empty: float | None) -> float | None:
    """`costs` summed exactly: `empty` when there are none, null for null."""
    return None if costs is None else math.fsum(costs) if costs else empty


def exact_sums(frame: pl.DataFrame, names: Iterable[str], *, empty: float | None = 0.0) -> pl.DataFrame:
    """`frame` with each column of `names`, a list of a row's costs, replaced by their exact sum (exact_sum)."""
    return frame.with_columns(
        pl.Series(name, [exact_sum(costs, empty) for costs in frame[name].to_list()], pl.Float64) for name in names)


def cost_sums(frame: pl.DataFrame, lost: str = "collapseCostUsd") -> pl.DataFrame:
    """A summary's two costs as cache-report gives them: what collapses lost (`lost`; 0 without any) and the
    cost (`costUsd`; null when no call was priced, never $0)."""
    return exact_sums(exact_sums(frame, [lost]), ["costUsd"], empty=None)
