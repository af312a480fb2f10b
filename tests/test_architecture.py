"""The layers of src/dsh_audit, kept by a static scan of every import statement (ast: those inside functions and
TYPE_CHECKING blocks count too, so the rules hold whatever runs): click only in the command line (dsh_audit.cli),
polars nowhere in the readers or the core, and the readers and the core never importing the layers above them.
And the edge's one vocabulary: every --format takes its names from dsh_audit.sinks."""

from __future__ import annotations

import ast
from pathlib import Path

import click
import pytest

from dsh_audit.cli import main
from dsh_audit.sinks import SINKS

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "dsh_audit"

# The core: a log's model, the rules and the two engines that rebuild and check it. Everything else (reports,
# explain, golden, the sessions service, the sinks, the command line) is built on it. codecache keeps the compiled
# form of the code the fast path generates, as Python keeps a module's bytecode: the core's own, not an input.
# engines is where verify's unit of work runs (a process pool, a Dask cluster): it reads no input of its own.
CORE = frozenset({
    "admission", "checks", "codecache", "deepseek_wire", "digest_spool", "engines", "errors", "fastcheck", "fastpath",
    "finding_codes", "findings", "fold", "generations", "header", "jsjson", "lazy", "legacy", "model_calls",
    "reconstruct", "records", "rules", "seqlist", "shape", "stopping", "structure", "successors", "surface", "text",
    "tokens", "upcast", "verify", "vocabulary", "walker",
})
# What a reader may know of the rest: the errors it raises, the records it yields, the generations it names and
# the schemas' list of them (vocabulary: a header naming an unlisted generation is refused as the reader opens it).
READER_NEEDS = frozenset({"errors", "records", "generations", "vocabulary", "seqlist"})


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved; `from A import b` counts as A and A.b (b may be a
    module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return found


MODULES = {module_name(path): imported(path) for path in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> str:
    """`dsh_audit.readers.jsonl` -> `readers`; `dsh_audit.fold` -> `fold`."""
    return module.split(".")[1] if module.count(".") else ""


def uses(imports: set[str], library: str) -> bool:
    return any(name == library or name.startswith(library + ".") for name in imports)


def test_the_scan_sees_every_layer() -> None:
    assert {"dsh_audit.cli", "dsh_audit.cli.verify", "dsh_audit.readers.home", "dsh_audit.fold"} <= set(MODULES)
    assert uses(MODULES["dsh_audit.cli.options"], "click")
    assert uses(MODULES["dsh_audit.reports.cache_report"], "polars")
    assert "dsh_audit.readers.jsonl" in MODULES["dsh_audit.readers"]   # relative imports resolved
    assert {layer(module) for module in MODULES} >= CORE


@pytest.mark.parametrize("module", sorted(MODULES))
def test_click_is_the_command_line_s_alone(module: str) -> None:
    if layer(module) != "cli":
        assert not uses(MODULES[module], "click"), module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) in CORE | {"readers"}))
def test_no_polars_in_the_readers_or_the_core(module: str) -> None:
    assert not uses(MODULES[module], "polars"), module


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) in CORE))
def test_the_core_imports_only_the_core_and_the_readers(module: str) -> None:
    above = sorted(name for name in MODULES[module] if name.startswith("dsh_audit.")
                   and layer(name) not in CORE | {"readers", "schemas"})
    assert not above, (module, above)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) == "readers"))
def test_the_readers_import_only_readers_and_the_log_s_model(module: str) -> None:
    above = sorted(name for name in MODULES[module] if name.startswith("dsh_audit.")
                   and layer(name) not in READER_NEEDS | {"readers"})
    assert not above, (module, above)


def commands() -> list[click.Command]:
    found: list[click.Command] = []
    pending: list[click.Command] = [main]
    while pending:
        command = pending.pop()
        if isinstance(command, click.Group):
            context = click.Context(command)
            pending += [c for name in command.list_commands(context) if (c := command.get_command(context, name))]
        else:
            found.append(command)
    return found


def test_every_format_is_a_sink_and_its_help_lists_them() -> None:
    formats = {command.name: option for command in commands() for option in command.params
               if isinstance(option, click.Option) and "--format" in option.opts}
    assert {"verify", "rebuild", "header-diff", "cache-report", "sessions", "explain"} <= set(formats)
    used: set[str] = set()
    for name, option in formats.items():
        assert isinstance(option.type, click.Choice)
        choices = [str(choice) for choice in option.type.choices]
        assert set(choices) <= set(SINKS), name
        for choice in choices:   # each named with what it is
            assert f"{choice} ({SINKS[choice].summary})" in (option.help or ""), (name, choice)
        used.update(choices)
    assert used == set(SINKS)   # no sink without a command
