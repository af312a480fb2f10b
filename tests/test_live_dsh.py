"""End-to-end on the real dsh: the published CLI (0.1.0-rc.8, tests/live-dsh) runs each scenario offline against
a model server of ours on 127.0.0.1 (tests/live_server.py), and what it sent is the oracle (live-dsh.md).

For the v0 log dsh wrote and its v2/v3 migrations by the official packages, every assertion below holds:
- the rebuilt loop requests in DeepSeek wire form equal the bodies the server received, byte for byte, in number
  and order; so does each title call's body (its request is logged in full);
- each request's usage and cost are what the server answered; a compaction call's too, where the log has it,
  and one the log does not price is a row of its own, as many as the server received;
- explain, on the wire, names the wire message where each request first leaves its predecessor's prompt;
- verify passes it, its one warning (fast path on and off) a compaction call the log cannot price;
- a request cache-report calls an extension (no cause) extends its predecessor on the wire, and one that does
  not extend it has a cause naming what changed on the wire; every collapse it flags is one the server's cache
  saw (its read fell short of the predecessor's prompt), never unexplained: the simulated cache never expires.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import zstandard

from dsh_audit import open_logs, reconstruct_file, verify_path
from dsh_audit.deepseek_wire import to_wire_body
from dsh_audit.explain import explain_request
from dsh_audit.jsjson import dumps_bytes
from dsh_audit.reports.cache_report import CacheOptions, build_cache_report
from dsh_audit.reports.prices import default_table
from live_dsh import Run, Scenario, installed, run
from live_server import Answer, Received, Script
from official_migration import run_migrate

BLOCK = 16   # live_server.BLOCK_TOKENS, given to cache-report so that a short scenario is judged on it


def bash(command: str) -> tuple[str, dict[str, Any]]:
    return ("bash", {"command": command, "description": f"run {command}"})


SMALL_WINDOW = {"llm-deepseek": {"models": [{"id": "deepseek-v4-flash", "name": "DeepSeek-V4-Flash",
                                             "contextWindow": 12000}]}}
SCENARIOS = [
    Scenario("tool-call", Script(loop=[Answer("Let me look.", tool_calls=(bash("ls -a"),)), Answer("Nothing.")]),
             [[{"say": "list the files"}]], shows={"tool/result": 1}),
    Scenario("two-turns", Script(loop=[Answer("First.", reasoning="The user greets."), Answer("Second.")]),
             [[{"say": "hello"}, {"say": "and again"}]], shows={"turn/end": 2}),
    Scenario("resume", Script(loop=[Answer("One.")]), [[{"say": "first"}], [{"say": "second, resumed"}]],
             shows={"session/end-seed": 1, "request/header": 2}),
    Scenario("compact-command", Script(), [[{"say": "first"}, {"command": "/compact"}, {"say": "after it"}]],
             shows={"command/run": 1, "compaction/summary": 1}),
    Scenario("auto-compaction", Script(loop=[Answer("y" * 6000), Answer("z" * 6000), Answer("w" * 6000)]),
             [[{"say": "a"}, {"say": "b"}, {"say": "c"}, {"say": "d"}]], config=SMALL_WINDOW,
             shows={"compaction/summary": 2}),
    # A small window: the pruner runs at the step boundary, rewriting the result before it is first sent.
    Scenario("pruner", Script(loop=[Answer("Counting.", tool_calls=(bash("seq 1 2000"),)), Answer("Counted.")]),
             [[{"say": "count to 2000"}, {"say": "thanks"}]],
             config={**SMALL_WINDOW, "tool-result-pruner": {"thresholdChars": 1000, "headChars": 200,
                                                             "tailChars": 100}},
             shows={"compaction/prune": 1}),
    Scenario("overflow-recovery", Script(loop=[Answer("x" * 4000), Answer(fail="overflow"), Answer("Recovered.")]),
             [[{"say": "write a lot"}, {"say": "and more"}]], shows={"compaction/summary": 1}),
    Scenario("server-errors", Script(loop=[Answer(fail="500"), Answer(fail="503"), Answer("One."), Answer(fail="500")]),
             [[{"say": "first"}, {"say": "second"}]], shows={"llm/retry": 3}),
    Scenario("torn-stream", Script(loop=[Answer("a partial answer", fail="torn")]), [[{"say": "hello"}]],
             config={"llm-deepseek": {"retryPolicy": {"mode": "always"}}}, shows={"llm/retry": 1}),
    Scenario("model-change", Script(), [[{"say": "first"}, {"select": {"model": "deepseek-v4-pro"}}, {"say": "pro"}]],
             shows={"request/header": 2}),
    Scenario("agents-md-change", Script(),
             [[{"say": "first"}, {"write": {"path": "AGENTS.md", "text": "Answer in French.\n"}}, {"say": "again"}]],
             files={"AGENTS.md": "Be brief.\n"}, last_request_carries="Answer in French"),   # as a reminder
    Scenario("effort-change", Script(),
             [[{"say": "first"}, {"select": {"reasoningEffort": "max"}}, {"say": "think harder"}]],
             shows={"request/header": 2}),
    Scenario("rejected-summary", Script(compaction=[Answer("s" * 200_000)]),
             [[{"say": "first"}, {"command": "/compact"}, {"say": "after it"}]],
             shows={"compaction/end": 1, "compaction/summary": 0}),
]


@pytest.fixture(scope="module")
def dsh_installed() -> None:
    if not installed():
        pytest.fail("the dsh CLI of the end-to-end tests is not installed: run `make reference` "
                    "(tests/live-dsh/install.sh), which needs the npm registry")


def check_scenario_happened(live: Run, v0: Path) -> None:
    """The log shows what the scenario is for (a scenario that stopped exercising it would prove nothing)."""
    events = [json.loads(line)["type"] for line in v0.read_bytes().splitlines()[1:]]
    for kind, least in live.scenario.shows.items():
        found = events.count(kind)
        assert found >= least if least else found == 0, f"{found} {kind} event(s) logged"
    carried = live.scenario.last_request_carries
    if carried is not None:
        assert carried.encode() in live.of_kind("loop")[-1].body, f"the last request does not send {carried!r}"


def generations(live: Run, into: Path) -> dict[int, Path]:
    """The v0 log dsh wrote (decompressed) and its official v2 and v3 migrations."""
    v0 = into / "session.jsonl"
    v0.write_bytes(zstandard.ZstdDecompressor().stream_reader(live.log.read_bytes()).read())
    check_scenario_happened(live, v0)
    logs = {0: live.log}
    for result in run_migrate([v0]):
        if result["target"] in (2, 3):
            assert result["ok"], f"the official packages refused the v{result['target']} migration: {result}"
            logs[result["target"]] = Path(result["file"])
    return logs


def wire(body: bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(body)
    return value


def wire_change(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """What changed between two loop bodies on the wire, in cache-report's cause words (empty: `after` extends)."""
    changes = set()
    if before["model"] != after["model"]:
        changes.add("model-change")
    old, new = before["messages"], after["messages"]
    if old[0] != new[0]:
        changes.add("system-prompt-change")
    if before.get("tools") != after.get("tools"):
        changes.add("header-change")
    if new[1:len(old)] != old[1:]:
        changes.add("compaction-replace")
    return changes


def usage_of(received: Received) -> dict[str, int] | None:
    usage = received.usage if received.delivered else None
    if usage is None:
        return None
    return {"inputTokens": usage["prompt_cache_miss_tokens"], "outputTokens": usage["completion_tokens"],
            "cacheReadTokens": usage["prompt_cache_hit_tokens"]}


def check_requests(live: Run, log: Path) -> None:
    loops = live.of_kind("loop")
    rebuilt = reconstruct_file(log).requests
    bodies = [dumps_bytes(to_wire_body(json.loads(request.body or b""))) for request in rebuilt]
    assert len(bodies) == len(loops), f"{len(bodies)} requests rebuilt, the server received {len(loops)}"
    for index, (ours, theirs) in enumerate(zip(bodies, loops, strict=True)):
        assert ours == theirs.body, f"loop request {index + 1} differs on the wire"
    assert [request.usage for request in rebuilt] == [usage_of(received) for received in loops]


def check_report(live: Run, log: Path, process_starts: set[int]) -> None:
    rows = build_cache_report([log], CacheOptions(block=BLOCK, wire=True)).requests
    table = default_table()

    def costs(frame: pl.DataFrame, served: list[Received]) -> None:
        for row, received in zip(frame.iter_rows(named=True), served, strict=True):
            usage = usage_of(received)
            if usage is None:
                assert row["costUsd"] is None
                continue
            assert (row["inputTokens"], row["cacheReadTokens"], row["outputTokens"]) == (
                usage["inputTokens"], usage["cacheReadTokens"], usage["outputTokens"])
            cost = table.price(row["model"], row["timeMs"]).prices.cost(
                usage["inputTokens"], usage["cacheReadTokens"], usage["outputTokens"])
            assert row["costUsd"] == pytest.approx(cost, rel=1e-12)

    loops = live.of_kind("loop")
    requests = rows.filter(pl.col("kind") == "request")
    costs(requests, loops)

    # The title call's request is logged in full, its usage nowhere (dsh reads only the title from the stream).
    titles = rows.filter(pl.col("kind") == "title")
    assert [body.encode() for body in titles["wireBody"]] == [r.body for r in live.of_kind("title")]
    assert titles["costUsd"].is_null().all() and all("not priced" in note for note in titles["note"])

    # Every compaction call the server answered is a row; those whose usage the log has are priced from it.
    compactions = rows.filter(pl.col("kind") == "compaction")
    served = live.of_kind("compaction")
    assert len(compactions) == len(served)
    priced = compactions.filter(pl.col("costUsd").is_not_null())
    unpriced = compactions.filter(pl.col("costUsd").is_null())
    assert all("unlogged-model-call" in str(note) for note in unpriced["note"])
    by_usage = {json.dumps(usage_of(r), sort_keys=True) for r in served}
    for row in priced.iter_rows(named=True):
        usage = {"inputTokens": row["inputTokens"], "outputTokens": row["outputTokens"],
                 "cacheReadTokens": row["cacheReadTokens"]}
        assert json.dumps(usage, sort_keys=True) in by_usage, f"compaction @{row['seq']} priced from usage " \
                                                              "the server never answered"

    check_explain(live, log, requests)
    for index, row in enumerate(requests.iter_rows(named=True)):
        if index == 0:
            assert row["cause"] == "first-request"
            continue
        before, after = wire(loops[index - 1].body), wire(loops[index].body)
        changed = wire_change(before, after)
        causes = set(str(row["cause"] or "").split("+")) - {""}
        label = f"{log.name} request {index + 1} (seq {row['seq']}): cause {row['cause']!r}, wire {changed}"
        if index in process_starts:
            assert "resume" in causes, label
        if not causes:
            assert not changed, label + ": called an extension, but it does not extend on the wire"
        elif not changed and index not in process_starts:
            raise AssertionError(label + ": a prefix break is claimed, but it extends its predecessor on the wire")
        assert changed <= causes, label
        if row["collapse"]:
            assert "unexplained" not in causes, label
            previous = loops[index - 1].usage
            reads = (loops[index].usage or {}).get("prompt_cache_hit_tokens", 0)
            assert previous is not None, label + ": collapse after a request the server never read"
            assert reads < previous["prompt_tokens"] // BLOCK * BLOCK, label + ": the server's cache did not collapse"


def first_wire_divergence(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, int | None] | None:
    """Where `after` first leaves `before`'s prompt on the wire, in explain's prompt order: a config key, the
    tools, then the first differing wire message (its index); None where `after` extends it."""
    for key in dict.fromkeys([*before, *after]):
        if key not in ("messages", "tools") and before.get(key) != after.get(key):
            return f"config.{key}", None
    old, new = before["messages"], after["messages"]
    systems = next((i for i, message in enumerate(new) if message["role"] != "system"), len(new))
    first = next((i for i, message in enumerate(old) if i >= len(new) or new[i] != message), None)
    if before.get("tools") != after.get("tools") and (first is None or first >= systems):
        return "tools", None
    return None if first is None else ("message", first)


def check_explain(live: Run, log: Path, requests: pl.DataFrame) -> None:
    """explain, on the wire, names the wire message where each request first leaves its predecessor's prompt."""
    loops = live.of_kind("loop")
    for index, row in enumerate(requests.iter_rows(named=True)):
        where = first_wire_divergence(wire(loops[index - 1].body), wire(loops[index].body)) if index else None
        if where is None:
            continue
        (source,) = open_logs(log)
        found = explain_request(source, row["turn"], row["step"], row["attempt"])
        label = f"{log.name} request {index + 1}: the wire first differs at {where}"
        assert found.basis == "wire" and found.divergence is not None, label
        part, wire_index = where
        if part == "message":
            assert found.divergence.wire_index == wire_index, label + f", explain says {found.divergence}"
        else:
            assert found.divergence.part == part, label + f", explain says {found.divergence}"


def check_verify(live: Run, log: Path, summaries: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify passes the log, fast path on and off alike; its one warning is a compaction call the log does not
    price, once per call the server answered that none of the log's `summaries` records."""
    expected = ["unlogged-model-call"] * (len(live.of_kind("compaction")) - summaries)
    for fast in ("1", "0"):
        monkeypatch.setenv("DSH_AUDIT_FAST_PATH", fast)
        (report,) = verify_path(log)
        assert [(f.code, f.severity) for f in report.findings] == [(code, "warning") for code in expected], fast


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario.name for scenario in SCENARIOS])
def test_dsh_sends_what_the_log_rebuilds(scenario: Scenario, tmp_path: Path, dsh_installed: None,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    live = run(scenario, tmp_path / "run")
    starts = set(live.loops_before[1:])
    logs = generations(live, tmp_path)
    summaries = (tmp_path / "session.jsonl").read_bytes().count(b'{"type":"compaction/summary"')
    for generation, log in logs.items():
        try:
            check_requests(live, log)
            check_report(live, log, starts)
            check_verify(live, log, summaries, monkeypatch)
        except AssertionError as error:
            raise AssertionError(f"v{generation} log of {scenario.name}: {error}") from None
