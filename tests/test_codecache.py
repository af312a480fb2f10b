"""dsh_audit.codecache: generated source compiled once per machine, never stale, never in the way."""

from __future__ import annotations

import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import CodeType

import pytest

from dsh_audit import codecache, vocabulary

SOURCE = "class Row:\n    seq: int\n"


def _annotations(code: CodeType) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(code, namespace)
    return dict(namespace["Row"].__annotations__)  # type: ignore[attr-defined]


def plant(entry: Path, planted: str) -> None:
    """`entry` replaced by what was planted in its place: a link to /dev/zero (a read that never ends), a FIFO (a
    read that blocks) or a folder."""
    entry.unlink()
    if planted == "link-to-dev-zero":
        entry.symlink_to("/dev/zero")
    elif planted == "fifo":
        os.mkfifo(entry)
    else:
        entry.mkdir()


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
    plant(entry, planted)
    assert _annotations(codecache.compiled(SOURCE, "<row>")) == {"seq": int}


# -- what generates the source, cached by its inputs ----------------------------------------------------------------

PLAN = ("class Row:\n    seq: int\n", {"_c0": frozenset({"a", "b"})}, {"_r0": "^x"}, {"row": "_f0"})


def _generator(tmp_path: Path, text: str = "GENERATOR = 1\n") -> list[str]:
    module = tmp_path / "generator.py"
    module.write_text(text)
    return [str(module)]


def test_a_generated_plan_is_kept_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(codecache.CACHE_DIR, str(cache))
    generator = _generator(tmp_path)
    assert codecache.generated("types v0", "schemas-1", generator, lambda: PLAN) == PLAN
    assert [entry.suffix for entry in cache.iterdir()] == [".plan"]

    def no_generate() -> object:
        raise AssertionError("generated again although the cache holds it")

    assert codecache.generated("types v0", "schemas-1", generator, no_generate) == PLAN


def test_other_inputs_another_kind_or_an_edited_generator_generate_again(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(codecache.CACHE_DIR, str(cache))
    generator = _generator(tmp_path)
    codecache.generated("types v0", "schemas-1", generator, lambda: PLAN)
    assert codecache.generated("types v0", "schemas-2", generator, lambda: "other inputs") == "other inputs"
    assert codecache.generated("types v1", "schemas-1", generator, lambda: "other kind") == "other kind"
    _generator(tmp_path, "GENERATOR = 2\n")
    assert codecache.generated("types v0", "schemas-1", generator, lambda: "edited") == "edited"
    assert len(list(cache.glob("*.plan"))) == 4


def test_an_unreadable_generator_is_never_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(codecache.CACHE_DIR, str(cache))
    assert codecache.generated("types v0", "schemas-1", [str(tmp_path / "gone.py")], lambda: PLAN) == PLAN
    assert codecache.generated("types v0", "schemas-1", [str(tmp_path / "gone.py")], lambda: "again") == "again"
    assert not cache.exists()


@pytest.mark.parametrize("damage", ["torn", "foreign"])
def test_a_torn_or_foreign_plan_is_generated_and_written_again(damage: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A torn entry fails to load; a foreign one (well-formed, of another kind: here a code object) is not
    taken for the plan asked for."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(codecache.CACHE_DIR, str(cache))
    generator = _generator(tmp_path)
    codecache.generated("types v0", "schemas-1", generator, lambda: PLAN)
    (entry,) = cache.glob("*.plan")
    whole = entry.read_bytes()
    entry.write_bytes(whole[: len(whole) // 2] if damage == "torn" else marshal.dumps(compile("1", "<x>", "eval")))
    assert codecache.generated("types v0", "schemas-1", generator, lambda: PLAN) == PLAN
    assert entry.read_bytes() == whole
    assert [path.name for path in cache.iterdir()] == [entry.name]   # no temporary file left behind


@pytest.mark.parametrize("planted", ["link-to-dev-zero", "fifo", "folder"])
def test_a_planted_plan_is_never_followed_or_read(planted: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(codecache.CACHE_DIR, str(cache))
    generator = _generator(tmp_path)
    codecache.generated("types v0", "schemas-1", generator, lambda: PLAN)
    (entry,) = cache.glob("*.plan")
    plant(entry, planted)
    assert codecache.generated("types v0", "schemas-1", generator, lambda: "generated") == "generated"


def test_the_fast_types_and_checks_are_generated_once_per_machine(tmp_path: Path) -> None:
    """A second process with the same schemas and code generates neither the fast types nor the checks, nor
    reads a schema file: it loads their plans (and their compiled code) and decides the same."""
    script = ("import sys\nfrom dsh_audit import fastcheck, vocabulary\nfrom dsh_audit.fastpath import types\n"
              ""
              "def refuse(*args):\n    raise SystemExit('generated again')\n"
              "if sys.argv[1] == 'again':\n"
              "    types._plan = refuse\n    fastcheck.SourceCompiler.plan = refuse\n"
              "    vocabulary._read_schemas = refuse\n"
              "built = types.fast_types(0)\n"
              "print(len(built.events), len(built.messages), sorted(built.unsupported))\n")
    env = {**os.environ, codecache.CACHE_DIR: str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", script, when], capture_output=True, text=True, env=env,
                           timeout=120, check=False) for when in ("first", "again")]
    assert [run.returncode for run in runs] == [0, 0], runs[1].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout
    assert sorted(path.suffix for path in tmp_path.iterdir() if path.suffix == ".code") == [".code", ".code"]
    assert sorted(marshal.loads(path.read_bytes())[0] for path in tmp_path.glob("*.plan")) == [
        "fast types v0", "schema facts", "schemas digest"]


def test_an_edited_schema_file_is_read_again_whatever_its_size_and_time(tmp_path: Path) -> None:
    """The schemas' digest is kept under the files' names, sizes and times: an edit that keeps a file's size and
    puts its modification time back still moves its change time, so the next run reads the schemas again."""
    schemas = tmp_path / "schemas"
    shutil.copytree(Path(vocabulary.__file__).parent / "schemas", schemas)
    script = ("import sys\nfrom pathlib import Path\nfrom dsh_audit import vocabulary\n"
              "vocabulary.schema_root = lambda: Path(sys.argv[1])\nprint(vocabulary.schemas_digest())\n")

    def digest(cache: Path | str) -> str:
        run = subprocess.run([sys.executable, "-c", script, str(schemas)], capture_output=True, text=True,
                             env={**os.environ, codecache.CACHE_DIR: str(cache)}, timeout=120, check=True)
        return run.stdout.strip()

    before = digest(tmp_path / "cache")
    assert digest(tmp_path / "cache") == before == digest("")
    edited = schemas / "session-header.schema.json"
    status = edited.stat()
    text = edited.read_bytes()
    at = text.index(b'"description": "') + len(b'"description": "')   # one letter of a description, swapped
    edited.write_bytes(text[:at] + (b"Y" if text[at:at + 1] != b"Y" else b"Z") + text[at + 1:])
    os.utime(edited, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert edited.stat().st_size == status.st_size
    assert digest(tmp_path / "cache") == digest("") != before
