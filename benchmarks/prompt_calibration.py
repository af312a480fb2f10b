"""How close dsh-audit's prompt count is to the prompt size DeepSeek reported (inputTokens + cacheReadTokens).

    python benchmarks/prompt_calibration.py [--wild DIR] [--corpus DIR]

Fits the provider's framing (the tokens DeepSeek counts beyond V4's chat template) on the requests with real
usage of the wild logs (default tests/fixtures/wild), as the median of (logged prompt - template count), and
checks it on the corpus's requests (default $DSH_LOGS) whose real prompt is known: with --sidecars content, a
request whose header is not scrubbed. Prints one row per request and the residuals of the count the code uses
(reports.prediction.PROVIDER_FRAMING_TOKENS), min / median / max in tokens and percent, for each set.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

from dsh_audit.readers import open_logs
from dsh_audit.readers.discover import discover
from dsh_audit.reports.cache_report import calls
from dsh_audit.reports.prediction import PROVIDER_FRAMING_TOKENS, prompt_tokens, sidecar_header

ROOT = Path(__file__).resolve().parent.parent
# Corpus logs whose sidecars are not the header that was sent (docs/tokenizer.md): printed, not summarized.
SIDECARS_NOT_SENT = {
    "examples/acp-agent/tests/snapshots/both-mode-turn/session.jsonl":
        "its sidecar prompt and tool schemas alone count more than the whole prompt DeepSeek counted",
    "examples/acp-agent/tests/snapshots/persistent-pwsh-tool-turn/session.jsonl":
        "its sidecars hold a 103-character prompt and one tool for a prompt DeepSeek counted 1,255 tokens",
}


def measured(root: Path) -> Iterator[tuple[str, str, int, int]]:
    """(log, call, logged prompt, calibrated count) of every own request with usage whose real prompt is known."""
    for path in discover([root]):
        real = sidecar_header(path)
        for source in open_logs(path):
            for call in calls(source):
                if not isinstance(call, tuple) or call[0].usage is None or call[0].inherited:
                    continue
                request = call[0]
                usage = request.usage or {}
                fresh, reads = usage.get("inputTokens"), usage.get("cacheReadTokens")
                if not isinstance(fresh, int) or not isinstance(reads, int):
                    continue
                counted = prompt_tokens(request, real)
                if counted is not None:
                    yield (str(path.relative_to(root)), f"{request.turn}.{request.step}#{request.attempt}",
                           fresh + reads, counted)


def summary(rows: list[tuple[str, str, int, int]]) -> str:
    tokens = [counted - logged for _, _, logged, counted in rows]
    shares = [100 * (counted - logged) / logged for _, _, logged, counted in rows]
    return (f"{len(rows)} requests; count - logged: min {min(tokens):+d}, median {statistics.median(tokens):+g}, "
            f"max {max(tokens):+d} tokens; min {min(shares):+.2f} %, median {statistics.median(shares):+.2f} %, "
            f"max {max(shares):+.2f} %")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wild", type=Path, default=ROOT / "tests" / "fixtures" / "wild")
    parser.add_argument("--corpus", type=Path, default=os.environ.get("DSH_LOGS"))
    args = parser.parse_args()
    sets = {"fit (wild)": list(measured(args.wild))}
    if args.corpus is not None:
        sets["check (corpus)"] = list(measured(args.corpus))
    fitted = statistics.median(logged - (counted - PROVIDER_FRAMING_TOKENS) for _, _, logged, counted in
                               sets["fit (wild)"])
    print(f"framing fitted on the wild logs: {fitted:g} tokens; in use: {PROVIDER_FRAMING_TOKENS}")
    for name, rows in sets.items():
        print(f"\n{name}")
        for log, call, logged, counted in rows:
            print(f"  {log}  {call}  logged {logged}  counted {counted}  {counted - logged:+d}"
                  + (f"  (left out: {SIDECARS_NOT_SENT[log]})" if log in SIDECARS_NOT_SENT else ""))
        kept = [row for row in rows if row[0] not in SIDECARS_NOT_SENT]
        print(f"  {summary(kept)}" if kept else "  no request with usage and a known prompt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
