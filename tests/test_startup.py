"""Start-up: `audit --help`, `--version` and every command's --help load none of the heavy libraries the commands
use (benchmarks/startup.py measures the CPU this saves)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from dsh_audit.cli import _LazyGroup, main

HEAVY = ("polars", "jsonschema", "pyarrow", "deepdiff", "tokenizers")
COMMANDS = [[name] for name in sorted(main.list_commands(click.Context(main)))]
GOLDEN = main.get_command(click.Context(main), "golden")
assert isinstance(GOLDEN, click.Group)
COMMANDS += [["golden", name] for name in sorted(GOLDEN.commands)]


def imported_modules(*args: str) -> set[str]:
    """The modules `python -m dsh_audit ARGS` imported, from -X importtime's report on stderr."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "dsh_audit", *args], capture_output=True,
                          timeout=120, check=False, env={**os.environ, "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout
    return set(re.findall(rb"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.MULTILINE))


def heavy(modules: set[bytes]) -> list[str]:
    return sorted({name.decode().split(".")[0] for name in modules} & set(HEAVY))


@pytest.mark.parametrize("args", [["--help"], ["--version"], *([*names, "--help"] for names in COMMANDS)],
                         ids=" ".join)
def test_help_and_version_import_no_heavy_library(args: list[str]) -> None:
    modules = imported_modules(*args)
    assert b"click" in modules   # the report was read
    assert heavy(modules) == []   # cache-report's help too: it quotes the bundled price table, read unchecked


def test_the_command_list_is_click_s_own() -> None:
    """`audit --help` lists a lazy command by the summary kept in _LazyGroup.lazy: it must shorten, at any width,
    to what the command's own help does."""
    for name, (_, summary) in _LazyGroup.lazy.items():
        command = main.get_command(click.Context(main), name)
        assert command is not None
        for limit in range(20, 200):
            listed = click.Command(name, help=summary).get_short_help_str(limit)
            assert listed == command.get_short_help_str(limit), (name, limit)


def test_verify_on_a_plain_log_loads_only_what_it_needs() -> None:
    """A plain JSONL log given by path is read without SQLite, zstandard, importlib.resources (the schemas are
    read as files), dsh's home or fsspec, which only a URL needs (benchmarks/startup.py measures the CPU this
    saves)."""
    log = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery" / "session.jsonl"
    modules = {name.decode() for name in imported_modules("verify", str(log))}
    assert "dsh_audit.verify" in modules   # the report was read
    assert not {"sqlite3", "zstandard", "importlib.resources", "dsh_audit.readers.home", "fsspec",
                "dsh_audit.readers.remote"} & modules
    assert not {"concurrent.futures", "multiprocessing", "dask", "distributed"} & modules   # one log: no pool


def test_verify_with_one_job_starts_no_engine() -> None:
    """`verify -j 1 DIR` reads every log in its own process: no pool, no Dask (dsh_audit.engines)."""
    folder = Path(__file__).resolve().parents[1] / "sample_logs"
    modules = {name.decode() for name in imported_modules("verify", "-j", "1", "--all-generations", str(folder))}
    assert "dsh_audit.engines" in modules
    assert not {"concurrent.futures", "multiprocessing", "dask", "distributed"} & modules
