"""`audit explain LOG TURN.STEP[#ATTEMPT]`: cache-report's verdict on a request, the first divergence between it
and what the cache could hold before it, and the logged event that explains it. Exit codes: 0 extends or
explained, 1 unexplained (a divergence no logged event explains, or an unexplained collapse), 2 unreadable
input, bad usage or no such request."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .cli import COLOR_OPTION, EXIT_CLEAN, EXIT_FINDINGS, SESSION_OPTION, chosen_log, parse_step, print_view
from .errors import DshAuditError
from .reports.views import Terminal, shown_path, terminal, wrap
from .text import printable

if TYPE_CHECKING:
    from .explain import Explanation

VERDICT_STYLES: dict[str, dict[str, Any]] = {"healthy": {"fg": "green"}, "cross-session-read": {"fg": "cyan"},
                                             "collapse": {"fg": "red"}, "unexplained-collapse": {"fg": "red",
                                                                                                 "bold": True}}


def unexplained(explanation: Explanation) -> bool:
    """A divergence no logged event explains, or a collapse cache-report calls unexplained: exit 1."""
    return explanation.verdict == "unexplained" or (explanation.cache is not None
                                                    and explanation.cache.kind == "unexplained-collapse")


def render(explanation: Explanation, label: str, term: Terminal) -> list[str]:
    lines: list[tuple[str, dict[str, Any]]] = [
        (f"{shown_path(label)} {explanation.name}" + (f", against {explanation.predecessor} and its answer: "
                                                      "what the provider could have cached"
                                                      if explanation.predecessor else ""), {"bold": True})]
    if explanation.note:
        lines.append((explanation.note, {"fg": "yellow"}))
    if explanation.cache is not None:
        lines.append((explanation.cache.text, VERDICT_STYLES.get(explanation.cache.kind, {})))
    divergence = explanation.divergence
    if explanation.verdict == "first request":
        if explanation.cache is None or explanation.cache.kind not in ("first-request", "cross-session-read"):
            lines.append(("first request of the log", {}))
    elif divergence is None:
        lines.append((f"no divergence: it extends what was cached, adding {explanation.appended} message(s)",
                      {"fg": "green"}))
    else:
        where = (f"message {divergence.message_index}" + (" (the predecessor's answer, as generated)"
                                                          if divergence.generated else "")
                 if divergence.part == "message" else divergence.part)
        if divergence.wire_index is not None:
            where += f", wire message {divergence.wire_index}"
        body = "wire body" if explanation.basis == "wire" else "request body"
        tokens = "" if divergence.token_offset is None else f", after {divergence.token_offset:,} prompt tokens"
        lines.append((f"first divergence: {where}, byte {divergence.part_offset} of it (byte "
                      f"{divergence.body_offset} of the {body}){tokens}", {"fg": "yellow"}))
        lines.append((f"  cached:  {divergence.before}", {}))
        lines.append((f"  request: {divergence.after}", {}))
    if explanation.logged_only:
        shown = "; ".join(f"message {item.message_index} ({', '.join(item.fields)})"
                          for item in explanation.logged_only)
        lines.append((f"logged only, alike on the wire: {shown}", {}))
    if explanation.side_calls:
        seqs = ", ".join(str(seq) for seq in explanation.side_calls)
        since = f"since {explanation.predecessor}" if explanation.predecessor else "before it"
        lines.append((f"side calls logged {since}: seq {seqs}, the product's own calls to the model: outside the "
                      "loop's cache lineage, they neither break nor explain its prefix (audit cache-report counts "
                      "them, unpriced)", {}))
    for cause in explanation.causes:
        lines.append((f"logged: seq {cause.seq} {cause.type} ({cause.reason})", {"fg": "cyan"}))
    if explanation.verdict == "unexplained":
        lines.append((f"unexplained: {explanation.needed}", {"fg": "red", "bold": True}))
    elif explanation.needed:
        lines.append((f"not a break in the log: {explanation.needed}", {}))
    return [term.style(part, **how) for line, how in lines for part in wrap(line, term.width, "")]


@click.command("explain", epilog="""\b
Examples:
  audit explain session.v3.jsonl 1.2#2    why request 1.2#2 did (not) extend what was cached before it
  audit explain --session 3f2a 4.1        the first attempt of turn 4, step 1
Exit codes: 0 it extends its predecessor or a logged event explains the break, 1 unexplained
(a divergence no logged event explains, or an unexplained collapse), 2 unreadable input, bad usage
or no such request, 3 internal error, 130 interrupted.""")
@click.argument("log", required=False, type=click.Path(path_type=Path))
@click.argument("request", required=False, metavar="TURN.STEP[#ATTEMPT]")
@SESSION_OPTION
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@COLOR_OPTION
def explain(log: Path | None, request: str | None, session: str | None, fmt: str, color: str | None) -> int:
    """Where request TURN.STEP[#ATTEMPT] of LOG first differs from what the provider could have cached before it
    (its predecessor's prompt and answer), and the logged event that explains it, or "unexplained"."""
    if session is not None and request is None and log is not None:   # `--session ID 1.2`: LOG is the request
        log, request = None, str(log)
    wanted = parse_step(request, "TURN.STEP[#ATTEMPT]")
    if wanted is None:
        raise DshAuditError("give the request to explain, TURN.STEP or TURN.STEP#ATTEMPT (as cache-report "
                            "and rebuild --format digest name it)")
    # the tokenizer and polars are imported here, not above: `audit explain --help` starts without them
    from .explain import explain_request
    from .readers import open_logs

    path = chosen_log(log, session)
    sources = list(open_logs(path))
    if len(sources) != 1:   # a store of several sessions (or none): which one is not for us to guess
        raise DshAuditError(f"holds {len(sources)} sessions; name one as {path}#SESSION_ID", path=str(path))
    [source] = sources
    explanation = explain_request(source, *wanted)
    if fmt == "json":
        click.echo(printable(json.dumps({"log": source.label, **asdict(explanation)}, indent=2, ensure_ascii=False)))
    else:
        term = terminal()
        print_view(term, "\n".join(render(explanation, source.label, term)))
    return EXIT_FINDINGS if unexplained(explanation) else EXIT_CLEAN
