"""What --since/--until (with --timezone) and --project mean, for every command that takes them, and which logs a
command reading whole logs (`audit verify`, `audit header-diff`) takes under --since/--until,
--model and --project: picked by what a log says before its first request, since such a command cannot keep
part of a log. The session header's `createdAt` (when the session started) and `cwd`, and the model of its first
request header (dsh logs none in the session header, in any generation). A log that does not say (no createdAt or
one before dsh existed: records.started_ms; no cwd or a scrubbed one; no request header; or a stream that can
be read only once) is taken: a gate leaves out only what it can tell is outside the filters, and says so for each
log it leaves out."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, tzinfo

import msgspec

from .errors import DshAuditError
from .header import is_placeholder
from .records import LogSource, started_ms

_RELATIVE = re.compile(r"(\d{1,6})([hdw])")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def zone(name: str | None) -> tzinfo:
    """--timezone: an IANA name (Europe/Paris), else UTC; ValueError for a name that is none."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # only with --since/--until/--timezone (~2 ms)

    if name is None or name.upper() == "UTC":
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a time zone name (such as UTC or Europe/Paris)") from None


def moment_ms(text: str, *, zone: tzinfo, now: datetime, end: bool = False) -> int:
    """--since/--until as epoch milliseconds: `7d`, `24h`, `2w` before `now`; an ISO date (its first moment, or
    with `end` its last: --until 2026-12-01 counts that whole day); an ISO date and time, in `zone` unless it
    names its own offset. ValueError for a text that is none of these."""
    relative = _RELATIVE.fullmatch(text)
    if relative:
        return int((now - timedelta(**{_UNITS[relative[2]]: int(relative[1])})).timestamp() * 1000)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither a date (2026-12-01), a date and time (2026-12-01T09:30) nor a "
                            "span back from now (7d, 24h, 2w)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    if end and len(text) == len("2026-12-01"):
        moment += timedelta(days=1)
    return int(moment.timestamp() * 1000)


def project_path(text: str) -> str:
    """--project as a directory: absolute (against the current directory), not resolved through links, as dsh
    logs its cwd; without a trailing separator."""
    return os.path.normpath(os.path.abspath(text))


def in_project(cwd: str | None, project: str) -> bool:
    """`cwd` is the project's directory or below it."""
    return cwd is not None and (cwd == project or cwd.startswith(project.rstrip("/") + "/"))


class LogFilter(msgspec.Struct, frozen=True):
    """The filters as epoch milliseconds ([since, until)), models and absolute project directories, with how each
    option was given (`since_text`...), which the reason a log is left out quotes."""

    since_ms: int | None = None
    until_ms: int | None = None
    models: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    since_text: str | None = None
    until_text: str | None = None

    def __bool__(self) -> bool:
        return any((self.since_ms is not None, self.until_ms is not None, self.models, self.projects))

    def outside(self, source: LogSource) -> tuple[str, str] | None:
        """None for a log the filters take; else the option that leaves it out (as given: `--since 7d`) and what
        the log says against it."""
        return self.left_by(source.header, source.reopen)

    def left_by(self, header: Mapping[str, object], reopen: Callable[[], LogSource] | None
                ) -> tuple[str, str] | None:
        """As `outside`, from a log's session header and how to open it again (to read its first request)."""
        created = started_ms(header)
        if created is not None:
            if self.since_ms is not None and created < self.since_ms:
                return f"--since {self.since_text}", f"started {_moment(created)}"
            if self.until_ms is not None and created >= self.until_ms:
                return f"--until {self.until_text}", f"started {_moment(created)}"
        cwd = header.get("cwd")
        known = isinstance(cwd, str) and not is_placeholder(cwd)
        if self.projects and known and not any(in_project(str(cwd), p) for p in self.projects):
            return " ".join(f"--project {p}" for p in self.projects), f"run in {cwd}"
        if self.models:
            model = first_model(reopen)
            if model is not None and model not in self.models:
                return " ".join(f"--model {m}" for m in self.models), f"its first request is to {model}"
        return None


def first_model(reopen: Callable[[], LogSource] | None) -> str | None:
    """The model a log's first request header names, read from a second opening of it (None: none named before
    the end, a log that cannot be read twice, or one that cannot be read: verify then says why)."""
    if reopen is None:
        return None
    try:
        again = reopen()
    except DshAuditError:
        return None
    try:
        for record in again.records(expand=False):
            if record.event.get("type") == "request/header":
                data = record.event.get("data")
                header = data.get("header") if isinstance(data, dict) else None
                config = header.get("config") if isinstance(header, dict) else None
                model = config.get("model") if isinstance(config, dict) else None
                return model if isinstance(model, str) else None
    except DshAuditError:
        return None
    finally:
        again.close()
    return None


def _moment(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
