"""Run the published dsh CLI (tests/live-dsh, installed by tests/live-dsh/install.sh) on one scenario, offline.

A scenario is a model script (tests/live_server.py) and one or more dsh processes over the same session, each
playing steps through tests/live-dsh/driver.mjs: `{"say": text}`, `{"command": "/compact"}`,
`{"select": {"model": ..., "reasoningEffort": ...}}`, `{"write": {"path": ..., "text": ...}}`. The second and
later processes resume the session. What dsh logs is the v0 `session.jsonl.zstd` under the scenario's DSH_HOME.
No pytest here: tests/test_live_dsh.py asserts.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from live_server import ModelServer, Received, Script

LIVE_DIR = Path(__file__).resolve().parent / "live-dsh"
BIN = LIVE_DIR / "node_modules" / ".bin"
DRIVER = LIVE_DIR / "driver.mjs"
PROCESS_TIMEOUT = 120   # seconds for one dsh process; a scenario's server lives at most as long as its processes


@dataclass
class Scenario:
    name: str
    script: Script
    processes: list[list[dict[str, Any]]]            # steps of each dsh process, in order
    config: dict[str, dict[str, Any]] = field(default_factory=dict)   # plugin id -> config patched in
    files: dict[str, str] = field(default_factory=dict)                # working-directory files before the run
    shows: dict[str, int] = field(default_factory=dict)   # event type -> how many the log must hold at least
    last_request_carries: str | None = None               # text the last loop request must send


@dataclass
class Run:
    scenario: Scenario
    received: list[Received]
    log: Path                                        # the v0 session.jsonl.zstd dsh wrote
    outcomes: list[dict[str, Any]]                   # the driver's report of each process
    loops_before: list[int]                          # loop requests received before each process began

    def of_kind(self, kind: str) -> list[Received]:
        return [received for received in self.received if received.kind == kind]


class LiveDshError(RuntimeError):
    pass


def installed() -> bool:
    return (BIN / "dsh").exists() and (BIN / "node").exists()


def _overlay(scenario: Scenario, steps: list[dict[str, Any]], resume: bool) -> list[dict[str, Any]]:
    """The patch layer: the shipped one-shot runner off, the driver on, the scenario's plugin config in."""
    driver = {"id": "live-driver", "name": str(DRIVER),
              "config": {"sessionId": f"session-{scenario.name}", "resume": resume, "steps": steps}}
    patches: list[dict[str, Any]] = [{"id": "headless-startup", "disabled": True},
                                     {"id": "headless-runner", "disabled": True}]
    patches += [{"id": plugin, "config": config} for plugin, config in scenario.config.items()]
    return [*patches, {"insert": [driver]}]


def run(scenario: Scenario, root: Path) -> Run:
    """Play `scenario` under `root` (its DSH_HOME and working directory) against a fresh model server."""
    home, work = root / "home", root / "work"
    home.mkdir(parents=True)
    work.mkdir(parents=True)
    for name, text in scenario.files.items():
        (work / name).write_text(text, encoding="utf-8")
    outcomes: list[dict[str, Any]] = []
    loops_before: list[int] = []
    lifetime = PROCESS_TIMEOUT * len(scenario.processes) + 10
    with ModelServer(scenario.script, lifetime=lifetime) as server:
        env = {"PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(root),
               "LANG": "C.UTF-8", "DEEPSEEK_BASE_URL": server.url, "DEEPSEEK_API_KEY": "offline",
               "DSH_TELEMETRY_DISABLED": "1", "DSH_HOME": str(home)}
        for index, steps in enumerate(scenario.processes):
            loops_before.append(sum(received.kind == "loop" for received in server.received))
            overlay = root / f"overlay-{index}.yml"
            overlay.write_text(json.dumps(_overlay(scenario, steps, resume=index > 0)), encoding="utf-8")
            try:
                done = subprocess.run([str(BIN / "dsh"), "--profile", "headless", "--patch", str(overlay)],
                                      cwd=work, env=env, capture_output=True, text=True,
                                      timeout=PROCESS_TIMEOUT, check=False)
            except subprocess.TimeoutExpired as error:
                raise LiveDshError(f"{scenario.name}: dsh process {index + 1} ran over {PROCESS_TIMEOUT} s") from error
            report = [line for line in done.stdout.splitlines() if line.startswith('{"session"')]
            if done.returncode != 0 or not report:
                raise LiveDshError(f"{scenario.name}: dsh process {index + 1} exited {done.returncode}:\n"
                                   f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
            outcomes.append(json.loads(report[-1]))
        received = list(server.received)
    logs = sorted(home.glob("sessions/*/*/session.jsonl.zstd"))
    if len(logs) != 1:
        raise LiveDshError(f"{scenario.name}: dsh wrote {len(logs)} session logs, expected 1: {logs}")
    return Run(scenario, received, logs[0], outcomes, loops_before)
