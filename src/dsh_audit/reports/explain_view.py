"""The terminal view of `audit explain`: the request and what it is held against, cache-report's verdict, the
first divergence with both sides shown, and the logged events that explain it (or "unexplained")."""

from __future__ import annotations

from typing import Any

from ..explain import Explanation
from .views import Terminal, shown_path, wrap

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
