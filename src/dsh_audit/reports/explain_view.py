"""The terminal view of `audit explain`: the request and what it is held against, cache-report's verdict, the
facts of its row (time since the predecessor, cache block, what a collapse cost), the first divergence with both
sides shown, the logged events that explain it (or "unlogged"), and for a collapse that is the provider's own the
evidence."""

from __future__ import annotations

from typing import Any

from ..explain import Explanation
from .views import Terminal, duration, shown_path, usd, wrap

VERDICT_STYLES: dict[str, dict[str, Any]] = {"healthy": {"fg": "green"}, "cross-session-read": {"fg": "cyan"},
                                             "collapse": {"fg": "red"}, "unexplained-collapse": {"fg": "red",
                                                                                                 "bold": True}}


def render(explanation: Explanation, label: str, term: Terminal) -> list[str]:
    lines: list[tuple[str, dict[str, Any]]] = [
        (f"{shown_path(label)} {explanation.name}" + (f", against {explanation.predecessor} and its answer: "
                                                      "what the provider could have cached"
                                                      if explanation.predecessor else ""), {"bold": True})]
    if explanation.note:
        lines.append((explanation.note, {"fg": "yellow"}))
    if explanation.cache is not None:
        lines.append((explanation.cache.text, VERDICT_STYLES.get(explanation.cache.kind, {})))
        lines.append(("; ".join(_facts(explanation)), {}))
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
    if explanation.verdict == "unlogged" and explanation.unexplained:
        lines.append((f"unexplained: {explanation.needed}", {"fg": "red", "bold": True}))
    elif explanation.verdict == "unlogged":   # a break the log does not record, but no unexplained collapse
        lines.append((f"unlogged: {explanation.needed}; the provider's read shows no unexplained collapse (audit "
                      "verify reports the break)", {"fg": "yellow"}))
    elif explanation.needed:
        lines.append((f"not a break in the log: {explanation.needed}", {}))
    if explanation.evidence:
        lines.append((f"evidence: {explanation.evidence}", {"fg": "red" if explanation.unexplained else None}))
    return [term.style(part, **how) for line, how in lines for part in wrap(line, term.width, "")]


def _facts(explanation: Explanation) -> list[str]:
    """The row's facts beside the verdict: the time since the predecessor, the cache block, what a collapse cost."""
    facts = []
    if explanation.since_predecessor_ms is not None:
        facts.append(f"sent {duration(explanation.since_predecessor_ms)} after {explanation.predecessor}"
                     if explanation.since_predecessor_ms >= 0 else
                     f"sent before {explanation.predecessor} by the log's times")
    if explanation.cache_block is not None:
        facts.append(f"cache block {explanation.cache_block} tokens")
    if explanation.collapse_cost_usd is not None:
        facts.append(f"the collapse cost {usd(explanation.collapse_cost_usd)}")
    return facts
