"""The terminal view of verify: a row per log (its status, path, generation and counts), its findings under it,
the same finding repeated over many lines told once with how often and where, and a closing summary.

Paths are shown as the user named them: below a directory given with an absolute path (or dsh's session root,
when no path was given), relative to it under one "in DIR:" line; elsewhere relative to the working directory
when below it. Every line fits the terminal; log text is shown escaped (dsh_audit.reports.views)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..findings import Finding, failing_rule
from ..verify import LogReport, summary
from .views import Terminal, located_error, shown_path, status_row, wrap

_SEVERITY_COLOUR = {"error": "red", "warning": "yellow", "info": "cyan"}


def render(reports: Sequence[LogReport], roots: Iterable[Path], term: Terminal, *, strict: bool) -> str:
    bases = [os.path.join(str(root), "") for root in roots if root.is_absolute() and root.is_dir()]
    lines: list[str] = []
    shown_base: str | None = None
    for report in reports:
        base = next((b for b in bases if report.label.startswith(b)), None)
        if base is not None and base != shown_base:
            lines += [term.style(line, bold=True) for line in wrap(f"in {base}", term.width, "")]
        shown_base = base
        label = report.label[len(base):] if base is not None else shown_path(report.label)
        lines += _log(report, label, term, strict)
    totals = summary(list(reports), strict)
    lines += [term.style(line, bold=True, fg="red" if totals["failed"] else None)
              for line in wrap(_summary_line(totals), term.width, "")]
    return "\n".join(lines) + "\n"


def _log(report: LogReport, label: str, term: Terminal, strict: bool) -> list[str]:
    if report.skipped:
        return [term.style(line, dim=True) for line in
                status_row("skipped", label, f"  (an older generation; read {report.superseded_by})", term.width)]
    if report.ignored is not None:
        return [term.style(line, dim=True) for line in
                status_row("ignored", label, f"  (not a dsh log: {report.ignored})", term.width)]
    if report.left_out_by is not None:
        return [term.style(line, dim=True) for line in
                status_row("left out", label, f"  (by {report.left_out_by}: {report.left_out})", term.width)]
    status = "UNREADABLE" if report.read_error else ("FAIL" if report.failed(strict) else "ok")
    generation = f"v{report.generation}" if report.generation is not None else "v?"
    rule = f"; {failing_rule(report.findings, report.unlisted, strict)}" if status == "FAIL" else ""
    details = f"  ({generation}, {report.events} events, {report.request_count} requests{rule})"
    lines = status_row(status, label, details, term.width)
    lines[0] = (term.style(status, fg="green", bold=None) if status == "ok" else term.style(status, fg="red", bold=True)
                ) + lines[0][len(status):]
    if report.read_error:
        lines += [term.style(line, fg="red") for line in
                  wrap(located_error(report.label, report.read_error), term.width, "    ")]
    for group in _grouped(report.findings):
        lines += [term.style(line, fg=_SEVERITY_COLOUR.get(group[0].severity))
                  for line in wrap(_finding_line(group), term.width, "    ")]
    if report.unlisted:
        counted = ", ".join(f"{count} {severity}" for severity, count in sorted(report.unlisted.items()))
        lines += wrap(f"... and {sum(report.unlisted.values())} more finding(s), counted but not listed "
                      f"({counted})", term.width, "    ")
    return lines


_NUMBER = re.compile(r"\d+")


def _grouped(findings: Iterable[Finding]) -> list[list[Finding]]:
    """Findings that say the same thing at several lines (severity, code, event type and message, but for the
    numbers in it: the seq a message names), together, in the order each was first reported."""
    groups: dict[tuple[Any, ...], list[Finding]] = {}
    for finding in findings:
        key = (finding.severity, finding.code, _NUMBER.sub("#", finding.message), finding.event_type)
        groups.setdefault(key, []).append(finding)
    return list(groups.values())


def _span(values: list[int | None], one: str, many: str) -> str | None:
    known = [value for value in values if value is not None]
    if not known:
        return None
    if len(known) == 1:
        return f"{one} {known[0]}"
    return f"{many} {min(known)}…{max(known)}"


def _finding_line(group: list[Finding]) -> str:
    first = group[0]
    where = [_span([f.line for f in group], "line", "lines"), _span([f.seq for f in group], "seq", "seq"),
             first.event_type]
    times = f" ×{len(group)}" if len(group) > 1 else ""
    told = first.message
    if any(finding.message != told for finding in group):
        told += f" (the first of {len(group)}; the others differ in their numbers)"
    located = ", ".join(part for part in where if part)
    return f"{located}: {first.severity}{times} [{first.code}] {told}" if located else (
        f"{first.severity}{times} [{first.code}] {told}")


def _summary_line(totals: dict[str, Any]) -> str:
    notes = f", {totals['notes']} note(s)" if totals["notes"] else ""
    skipped = f", {totals['skipped']} older generation(s) skipped" if totals["skipped"] else ""
    skipped += f", {totals['ignored']} file(s) that are not dsh logs ignored" if totals["ignored"] else ""
    skipped += "".join(f", {count} log(s) left out by {option}" for option, count in totals["leftOut"].items())
    return (f"{totals['logs']} log(s), {totals['failed']} failed, {totals['requests']} request(s) rebuilt, "
            f"{totals['errors']} error(s), {totals['warnings']} warning(s){notes}{skipped}")
