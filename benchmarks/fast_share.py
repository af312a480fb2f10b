"""How much of a set of logs verify's fast path decides (dsh_audit.fastpath), and why it leaves the rest.

    python benchmarks/fast_share.py LOG_OR_DIR... [--json]

For every log below the paths (as `audit verify` discovers them): whether the fast path accepted it, its lines,
and, for the logs it left to the full verifier, the reason. Prints a summary, or one JSON document.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from dsh_audit.errors import DshAuditError
from dsh_audit.fastpath import Decided, decide
from dsh_audit.readers import open_logs
from dsh_audit.readers.discover import discover_logs


def count_lines(path: Path) -> int:
    if path.suffix in (".zstd", ".zst"):
        return 0   # not decompressed here: the share of lines counts plain logs
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 22), b""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(argv)
    logs = accepted = lines = accepted_lines = 0
    reasons: Counter[str] = Counter()
    for path in discover_logs(opts.paths).files:
        try:
            sources = list(open_logs(path))
        except DshAuditError as error:
            reasons[f"unreadable: {error.message}"] += 1
            logs += 1
            continue
        for source in sources:
            logs += 1
            size = count_lines(path)
            lines += size
            verdict = decide(source)
            if isinstance(verdict, Decided):
                accepted += 1
                accepted_lines += size
            else:
                reasons[verdict] += 1
    summary = {"logs": logs, "accepted": accepted, "lines": lines, "acceptedLines": accepted_lines,
               "fallbackReasons": dict(reasons.most_common())}
    if opts.json:
        print(json.dumps(summary))
    else:
        print(f"fast path: {accepted}/{logs} logs, {accepted_lines:,}/{lines:,} lines")
        for reason, count in reasons.most_common():
            print(f"  {count:6d}  {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
