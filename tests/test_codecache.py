"""dsh_audit.codecache: generated source compiled once per machine, never stale, never in the way."""

from __future__ import annotations

import os
from pathlib import Path
from types import CodeType

import pytest

from dsh_audit import codecache

SOURCE = "class Row:\n    seq: int\n"


def _annotations(code: CodeType) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(code, namespace)
    return dict(namespace["Row"].__annotations__)  # type: ignore[attr-defined]


def test_a_compiled_source_is_kept_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(codecache.CACHE_DIR, str(tmp_path))
    first = codecache.compiled(SOURCE, "<row>")
    assert [entry.suffix for entry in tmp_path.iterdir()] == [".code"]

    def no_compile(source: str, filename: str) -> CodeType:
        raise AssertionError("compiled again although the cache holds it")

    monkeypatch.setattr(codecache, "_compile", no_compile)
    again = codecache.compiled(SOURCE, "<row>")
    assert again == first
    assert _annotations(again) == {"seq": int}   # the caller's postponed annotations are not inherited


def test_another_source_or_filename_is_another_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(codecache.CACHE_DIR, str(tmp_path))
    codecache.compiled(SOURCE, "<row>")
    codecache.compiled(SOURCE, "<other>")
    codecache.compiled(SOURCE + "    time: int\n", "<row>")
    assert len(list(tmp_path.glob("*.code"))) == 3


def test_a_torn_entry_is_compiled_and_written_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(codecache.CACHE_DIR, str(tmp_path))
    codecache.compiled(SOURCE, "<row>")
    (entry,) = tmp_path.glob("*.code")
    whole = entry.read_bytes()
    entry.write_bytes(whole[: len(whole) // 2])
    assert _annotations(codecache.compiled(SOURCE, "<row>")) == {"seq": int}
    assert entry.read_bytes() == whole
    assert [path.name for path in tmp_path.iterdir()] == [entry.name]   # no temporary file left behind


def test_an_unusable_cache_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_bytes(b"")
    monkeypatch.setenv(codecache.CACHE_DIR, str(blocker / "cache"))
    assert _annotations(codecache.compiled(SOURCE, "<row>")) == {"seq": int}
    assert blocker.read_bytes() == b""


def test_an_empty_setting_turns_the_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(codecache.CACHE_DIR, "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert codecache.cache_dir() is None
    codecache.compiled(SOURCE, "<row>")
    assert list(tmp_path.iterdir()) == []


def test_the_default_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(codecache.CACHE_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert codecache.cache_dir() == tmp_path / "dsh-audit"


@pytest.mark.parametrize("planted", ["link-to-dev-zero", "fifo", "folder"])
def test_a_planted_entry_is_never_followed_or_read(planted: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry is a file dsh-audit finds itself: a link (here to /dev/zero, which would never end), a FIFO
    (which would block) or a folder in its place is passed over and the source compiled as if there were none."""
    monkeypatch.setenv(codecache.CACHE_DIR, str(tmp_path))
    codecache.compiled(SOURCE, "<row>")
    (entry,) = tmp_path.glob("*.code")
    entry.unlink()
    if planted == "link-to-dev-zero":
        entry.symlink_to("/dev/zero")
    elif planted == "fifo":
        os.mkfifo(entry)
    else:
        entry.mkdir()
    assert _annotations(codecache.compiled(SOURCE, "<row>")) == {"seq": int}
