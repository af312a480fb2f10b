"""dsh-audit installed as users install it: built into an sdist and a wheel, installed (not editable) into a fresh
virtual environment, and run from there, outside the source tree, on the bundled sample.

The editable install the rest of the suite runs cannot see a module or a data file the wheel leaves out, so this
is the one test that would: every package and data file below src/ must be in the wheel, the wheel built from the
sdist must equal the one built from the checkout, and the installed `audit` must answer every command it is
asked for here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "dsh_audit"
SAMPLE = REPO / "sample_logs" / "compaction-recovery"
SHIPPED_SUFFIXES = (".py", ".json", ".typed")


def _run(command: list[str], *, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, f"{command} -> {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _source_files() -> set[str]:
    """What the wheel must hold: every module and data file below src/dsh_audit (schemas/ is linked in)."""
    found = set()
    for root, _dirs, files in os.walk(PACKAGE, followlinks=True):
        for name in files:
            if name.endswith(SHIPPED_SUFFIXES) and "__pycache__" not in root:
                found.add((Path(root) / name).relative_to(PACKAGE.parent).as_posix())
    return found


def _wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An sdist and the wheel built from it (python -m build), as a release would make them."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], cwd=out)
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and its dependencies (from the package index), nothing else."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=True, clear=True)
    [wheel] = dist.glob("*.whl")
    _run([str(home / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(wheel)], cwd=home)
    return home


def test_the_wheel_holds_every_module_and_data_file_below_src(dist: Path) -> None:
    [wheel] = dist.glob("*.whl")
    shipped = _wheel_files(wheel)
    expected = _source_files()
    assert len(expected) > 150   # modules, every generation's schemas, the price table
    assert expected - shipped == set(), "left out of the wheel"
    assert {name for name in shipped - expected if not name.endswith(".pyi")} == set(), "in the wheel, not in src"


def test_a_wheel_built_from_the_checkout_equals_the_one_built_from_the_sdist(dist: Path, tmp_path: Path) -> None:
    # `pip install ./dsh-audit` (docs/ci.md) builds from the checkout; a release builds from the sdist.
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path), str(REPO)],
         cwd=tmp_path)
    [from_checkout] = tmp_path.glob("*.whl")
    [from_sdist] = dist.glob("*.whl")
    assert _wheel_files(from_checkout) == _wheel_files(from_sdist)


def test_the_distribution_metadata_passes_twine_check(dist: Path) -> None:
    files = sorted(str(path) for path in dist.iterdir())
    assert any(f.endswith(".whl") for f in files) and any(f.endswith(".tar.gz") for f in files)
    done = _run([sys.executable, "-m", "twine", "check", "--strict", *files], cwd=dist)
    assert done.stdout.count("PASSED") == 2, done.stdout
    with zipfile.ZipFile(next(dist.glob("*.whl"))) as archive:
        metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        licenses = [n for n in archive.namelist() if n.endswith("/licenses/LICENSE")]
    assert "License-Expression: MIT" in metadata and licenses
    assert "Classifier: Typing :: Typed" in metadata and "Project-URL:" in metadata


def test_the_installed_wheel_runs_every_command_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "DSH_HOME")}
    env["DSH_HOME"] = str(tmp_path / "no-dsh-home")
    audit, python = str(installed / "bin" / "audit"), str(installed / "bin" / "python")
    where = _run([python, "-c", "import dsh_audit, dsh_audit.schemas as s; print(dsh_audit.__file__, *s.__path__)"],
                 cwd=tmp_path, env=env).stdout
    assert str(REPO) not in where and str(installed) in where   # the installed copy, not the checkout
    assert _run([audit, "--version"], cwd=tmp_path, env=env).stdout.startswith("audit, version ")
    assert _run([python, "-m", "dsh_audit", "--version"], cwd=tmp_path, env=env).stdout.startswith("audit")
    verified = _run([audit, "verify", "--all-generations", str(SAMPLE)], cwd=tmp_path, env=env).stdout
    assert "2 log(s), 0 failed, 6 request(s) rebuilt" in verified
    digests = _run([audit, "rebuild", "--format", "digest", str(SAMPLE / "session.v3.jsonl")], cwd=tmp_path,
                   env=env).stdout
    assert len(digests.splitlines()) == 3
    page = tmp_path / "report.html"
    _run([audit, "report", str(SAMPLE), "-o", str(page)], cwd=tmp_path, env=env)
    assert page.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    cache = _run([audit, "cache-report", "--format", "csv", str(SAMPLE)], cwd=tmp_path, env=env).stdout
    assert cache.splitlines()[0].startswith("log,") and len(cache.splitlines()) > 1
    shipped_schema = json.loads(_run([audit, "schema", "verify"], cwd=tmp_path, env=env).stdout)   # package data
    assert shipped_schema["$id"].endswith("dsh-audit/verify/1")
    dataset = tmp_path / "fleet"   # the fleet commands: export's process pool starts from the installed copy
    exported = json.loads(_run([audit, "export", str(SAMPLE), "--to", str(dataset), "--json"], cwd=tmp_path,
                               env=env).stdout)
    assert (exported["new"], exported["unreadable"]) == (1, [])
    totals = json.loads(_run([audit, "query", str(dataset), "--format", "json"], cwd=tmp_path, env=env).stdout)
    logged = json.loads(_run([audit, "cache-report", "--rows", "totals", "--format", "json", str(SAMPLE)],
                             cwd=tmp_path, env=env).stdout)
    assert totals["rows"] == logged["rows"]
    fleet_page = tmp_path / "fleet.html"
    _run([audit, "report", str(dataset), "-o", str(fleet_page)], cwd=tmp_path, env=env)
    assert fleet_page.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    for command in (["header-diff", str(SAMPLE)], ["explain", str(SAMPLE / "session.jsonl"), "1.2#1"],
                    ["golden", "--help"], ["sessions", "--root", str(SAMPLE.parent)]):
        _run([audit, *command], cwd=tmp_path, env=env)
