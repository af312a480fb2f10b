"""The project's config file: `dsh-audit.toml` in the directory a command runs from (a repository's root, where
CI and pre-commit run), read when it is there. It holds what a project settles once for every run:

    ignore = ["placeholder-header"]   # finding codes listed as notes, never failing a log (as --ignore)

Any other key, a value of another type or a code that is not registered is one line on stderr, exit 2."""

from __future__ import annotations

from pathlib import Path

import msgspec

from .errors import DshAuditError
from .findings import ignored_code_problem
from .readers.found import read_found

CONFIG_NAME = "dsh-audit.toml"
_LIMIT = 1 << 20   # bytes: a config of a few lines; a larger file is refused unread


class Config(msgspec.Struct, frozen=True):
    ignore: tuple[str, ...] = ()


def project_config(directory: Path | None = None) -> Config:
    """`dsh-audit.toml` in `directory` (the current one by default), or the empty config when there is none.
    dsh-audit names that path itself, so it is read as readers.found reads such a file: never through a link."""
    folder = directory or Path.cwd()
    path = folder / CONFIG_NAME
    if not path.exists() and not path.is_symlink():
        return Config()
    data = read_found(path, limit=_LIMIT, below=folder, what="the config file")
    import tomllib  # here: most runs have no config file, and need not load a TOML parser

    try:
        table = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise DshAuditError(f"{path}: not a TOML file: {error}") from None
    unknown = sorted(set(table) - {"ignore"})
    if unknown:
        raise DshAuditError(f"{path}: unknown key {unknown[0]!r}; the keys are: ignore")
    ignore = table.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(code, str) for code in ignore):
        raise DshAuditError(f"{path}: ignore must be a list of finding codes, e.g. ignore = [\"placeholder-header\"]")
    for code in ignore:
        problem = ignored_code_problem(code)
        if problem is not None:
            raise DshAuditError(f"{path}: ignore: {problem}")
    return Config(ignore=tuple(ignore))
