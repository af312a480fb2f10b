"""Issue 17, item 4: the session-title call is a model call of its own in cache-report (kind "title").

dsh's title provider logs its request as session/title-llm-request just before the call, and no event logs its
usage: the row is rebuilt from that event (its system and messages as logged), rendered as the DeepSeek adapter
sends it where its route is DeepSeek's (thinking disabled, max_tokens its maxTokens), placed at its seq among
the loop's requests, and left unpriced, saying so. Both engines (the fast path and the full walk) build it alike.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT
from dsh_audit.cli import main
from dsh_audit.generations import generations
from dsh_audit.model_calls import OtherCall, title_request
from dsh_audit.readers import open_logs
from dsh_audit.reports.cache_report import NO_TITLE_USAGE, CacheOptions, build_cache_report, calls
from genbuilder import GenLog
from logbuilder import MODEL, PROVIDER, LogBuilder
from test_cache_fastpath import Taken, _seeded, _verify_takes_it, compare, fast_facts, walked_facts
from test_fastpath import _mutate_bytes, _mutate_value, _persisted, concrete, full_report

CORPUS_TITLE = "examples/acp-agent/tests/snapshots/session-title-after-turn/session.jsonl"
SYSTEM = "Create a concise title for an AI coding-assistant session from the supplied human messages."
PROMPT = 'Generate the session title from this JSON array of human messages:\n[{"seq":4,"text":"fix the build"}]'
MUTANTS = 300


@pytest.fixture()
def taken(monkeypatch: pytest.MonkeyPatch) -> Taken:
    """Counts the logs cache-report's fast path read to the end (test_cache_fastpath.Taken)."""
    return Taken(monkeypatch)


def title_data(message_seqs: list[int], version: int = 0, **extra: Any) -> dict[str, Any]:
    """A session/title-llm-request as dsh-session-title-llm logs it, routed to the loop's provider and model (from
    v4 the plugin is the message's producer kind)."""
    plugin = "dsh-session-title-llm"
    source = {"kind": plugin} if version >= 4 else {"kind": "plugin", "plugin": plugin}
    message = {"content": [{"type": "text", "text": PROMPT}], "source": source, "role": "user", "id": "t-1"}
    return {"titleProvider": "session-title-first-prompt-llm", "messageSeqs": message_seqs,
            "route": {"provider": PROVIDER, "model": MODEL}, "system": SYSTEM, "messages": [message],
            "maxTokens": 32, **extra}


def usage(fresh: int, reads: int) -> dict[str, int]:
    return {"inputTokens": fresh, "cacheReadTokens": reads, "outputTokens": 10}


def v0_log(tmp_path: Path, name: str = "session.jsonl") -> Path:
    """Two turns; the title call dispatched in the first step, after its header and before the first chunk (as
    the corpus log has it)."""
    log = LogBuilder()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    prompt = log.user("fix the build")
    log.header_event("initial")
    log.add("session/title-llm-request", title_data([prompt]))
    log.response(1, 1, "done " * 50, usage=usage(300, 0))
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    log.simple_turn(2, "and the tests", "done too")
    log.add("session/title", {"title": "Fix the build", "messageSeqs": [prompt], "source": {
        "kind": "provider", "provider": "session-title-first-prompt-llm",
        "model": {"provider": PROVIDER, "model": MODEL}}})
    path = tmp_path / name
    path.write_text("".join(json.dumps(row, separators=(",", ":")) + "\n" for row in [log.header, *log.events]),
                    encoding="utf-8")
    return path


def settled_log(tmp_path: Path, version: int) -> Path:
    """The same in a settlement generation (v2, v3, v4): the title call before the settlement of its step."""
    log = GenLog(version)
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    if version >= 3:
        log.system(1, 1, "You are a coding agent.")
    prompt = log.user(1, "fix the build")
    log.header_event("initial", **({} if version >= 3 else {"system": "You are a coding agent."}))
    log.add("session/title-llm-request",
            title_data([prompt], version, **({"reasoningEffort": "high"} if version >= 4 else {})))
    log.response(1, 1, "done", usage=usage(300, 0))
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    log.turn(2, "and the tests", "done too", reason=None, usage=usage(20, 256))
    return log.write(tmp_path / f"session.v{version}.jsonl")


def constructed(tmp_path: Path) -> dict[str, Path]:
    logs = {"v0": v0_log(tmp_path), **{known.label: settled_log(tmp_path, known.version) for known in generations()
                                             if known.dispatch == "settlement"}}
    logs["v0-seeded"] = _seeded(logs["v0"], tmp_path / "seeded.jsonl")
    return logs


def wire() -> dict[str, Any]:
    """The body DeepSeek's adapter POSTs for the title request: purpose session-title disables thinking."""
    return {"model": MODEL, "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}],
            "stream": True, "stream_options": {"include_usage": True}, "thinking": {"type": "disabled"},
            "max_tokens": 32}


# -- the rebuilt request ---------------------------------------------------------------------------------------
def test_title_request_is_the_logged_one() -> None:
    data = title_data([4], reasoningEffort="high")
    request = title_request(data)
    assert list(request) == ["provider", "model", "reasoningEffort", "maxTokens", "messages", "system"]
    assert request["messages"] == data["messages"] and request["system"] == SYSTEM and request["maxTokens"] == 32
    assert list(title_request({"route": {"provider": "p"}, "messages": []})) == ["provider", "messages"]


@pytest.mark.skipif(not (LOGS_ROOT / CORPUS_TITLE).is_file(), reason="shared dsh-logs corpus not present")
def test_corpus_title_call(taken: Taken, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The corpus's one title request (seq 9, before the first chunk at 10): its own row, first; routed to the
    snapshot harness's replay provider, so no DeepSeek body; its usage is in no event (the closing session/title,
    source provider, names only the route), so it is not priced."""
    path = LOGS_ROOT / CORPUS_TITLE
    [call] = [c for c in calls(next(iter(open_logs(path)))) if isinstance(c, OtherCall)]
    logged = next(json.loads(line)["data"] for line in path.read_text(encoding="utf-8").splitlines()
                  if '"session/title-llm-request"' in line)
    assert (call.kind, call.seq, call.provider, call.model, call.usage) == ("title", 9, "title-replay",
                                                                            "title-model", None)
    assert call.request == {"provider": "title-replay", "model": "title-model", "maxTokens": 32,
                            "messages": logged["messages"], "system": logged["system"]}
    rows = build_cache_report([path], CacheOptions(wire=True)).requests.to_dicts()
    assert [(row["kind"], row["seq"]) for row in rows] == [("title", 9), ("request", 10)]
    title = rows[0]
    assert title["costUsd"] is None and title["inputTokens"] is None and title["wireBody"] is None
    assert NO_TITLE_USAGE in title["note"] and "routed to title-replay" in title["note"]
    # the same log in persisted form, made concrete: the fast path reads it, and both engines agree
    made = tmp_path / "session.jsonl"
    made.write_bytes(concrete(b"\n".join(_persisted(CORPUS_TITLE) or []) + b"\n"))
    assert _verify_takes_it(made) and compare(made, taken, monkeypatch)


# -- constructed logs, every generation, both engines ---------------------------------------------------------
def test_constructed_title_calls(tmp_path: Path, taken: Taken, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, path in constructed(tmp_path).items():
        assert not full_report(path).findings, name   # a log dsh could have written: verify finds nothing
        assert _verify_takes_it(path), name
        assert compare(path, taken, monkeypatch), name   # the fast path read it; its frames equal the walk's
        assert fast_facts(path) == walked_facts(path), name
        report = build_cache_report([path], CacheOptions(wire=True))
        rows = report.requests.to_dicts()
        assert [row["seq"] for row in rows] == sorted(row["seq"] for row in rows), name   # dispatch order
        assert [row["kind"] for row in rows] == ["title", "request", "request"], name
        title = rows[0]
        assert json.loads(title["wireBody"]) == wire(), name   # v4's logged reasoningEffort: thinking stays off
        assert (title["provider"], title["model"], title["costUsd"], title["outputTokens"]) == (
            PROVIDER, MODEL, None, None), name
        assert title["note"].endswith(NO_TITLE_USAGE) and "DeepSeek wire body" not in title["note"], name
        assert title["inherited"] == (name == "v0-seeded"), name   # the child replays its parent's title call
        [log] = report.logs.to_dicts()
        own = (1, 0) if name == "v0-seeded" else (2, 1)   # sums count a child's own calls only
        assert (log["requests"], log["otherCalls"], log["compactionCalls"]) == (*own, 0), name
        loop = [row for row in rows if row["kind"] == "request" and not row["inherited"]]
        priced = [row["costUsd"] for row in loop if row["costUsd"] is not None]
        if priced:
            assert log["costUsd"] == pytest.approx(sum(priced)), name
        else:   # the child's own request logged no usage: no cost, not $0
            assert log["costUsd"] is None, name


def test_json_output(tmp_path: Path) -> None:
    path = v0_log(tmp_path)
    result = CliRunner().invoke(main, ["cache-report", "--format", "json", "--wire", str(path)])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["schema"] == "dsh-audit/cache-report/requests"
    title = document["rows"][0]
    assert (title["kind"], title["seq"], title["turn"], title["costUsd"], title["cacheReadTokens"]) == (
        "title", 4, None, None, None)
    assert json.loads(title["wireBody"]) == wire()
    assert [row["kind"] for row in document["rows"]] == ["title", "request", "request"]
    table = CliRunner().invoke(main, ["cache-report", str(path)], env={"COLUMNS": "200"})
    assert "title @4" in table.output and "title call not priced" in table.output


def test_a_route_not_deepseeks_has_no_wire_body(tmp_path: Path) -> None:
    path = v0_log(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace(
        f'"route":{{"provider":"{PROVIDER}"', '"route":{"provider":"other-llm"'), encoding="utf-8")
    title = build_cache_report([path], CacheOptions(wire=True)).requests.to_dicts()[0]
    assert title["provider"] == "other-llm" and title["wireBody"] is None
    assert "routed to other-llm, not DeepSeek's adapter" in title["note"]


def test_fuzzed_title_lines(tmp_path: Path) -> None:
    """Edits of the title request's line (values, bytes, moved a line up or down): wherever the fast path still
    reads the log, its calls equal the walk's; and it reads exactly the logs verify's fast path accepts."""
    lines = v0_log(tmp_path, "base.jsonl").read_bytes().split(b"\n")[:-1]
    index = next(i for i, line in enumerate(lines) if b"title-llm-request" in line)
    rng = random.Random("title-calls")
    path = tmp_path / "session.jsonl"
    outcomes: Counter[str] = Counter()
    for _ in range(MUTANTS):
        edited = list(lines)
        how = rng.randrange(3)
        if how == 0:
            edited[index] = json.dumps(_mutate_value(rng, json.loads(lines[index])), separators=(",", ":"),
                                       ensure_ascii=False).encode()
        elif how == 1:
            edited[index] = _mutate_bytes(rng, lines[index]) or lines[index]
        else:
            other = index + rng.choice((-1, 1))
            edited[index], edited[other] = edited[other], edited[index]
        path.write_bytes(b"\n".join(edited) + b"\n")
        found = fast_facts(path)
        assert (found is not None) == _verify_takes_it(path)
        if found is not None:
            assert found == walked_facts(path), edited[index]
        outcomes["fast" if found is not None else "walked"] += 1
    assert outcomes["fast"] >= 5 and outcomes["walked"] >= 5, outcomes
