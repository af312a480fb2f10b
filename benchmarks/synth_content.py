"""Deterministic synthetic content for benchmark logs: token pools, a system prompt, tool schemas, tool output.

Everything here is written for this project (no upstream prose). Text is built once into large pools of
token strings so that the generator can take a block of N tokens as a C-level list slice: per-token Python
work would make a 1 GB log take minutes.
"""

from __future__ import annotations

import random
import re
from typing import Any

WORDS = """
the a an of to in for on with by from as at is are was be been it this that these those we you they
file files function module class method test tests error errors value values result results change changes
line lines path paths read write edit run runs build check checks log logs event events request requests
session sessions header headers message messages step steps turn turns tool tools call calls output input
parser reader writer fold surface replace append node nodes index offset limit buffer cache token tokens
config option options default flag flags schema schemas field fields type types string number integer array
object list dict map set key keys order sorted first last next previous before after while because since
so then else if when not only also still already again now here there where which what why how because
should could would might must can will may need needs needed want wants look looks looking see seems
fix fixes fixed bug bugs issue issues patch diff commit branch repository directory folder workspace
python typescript node package packages import imports export exports install version release upstream
handle handles handled parse parses parsed load loads loaded save saves saved stream streams streamed
chunk chunks packed pack unpack row rows column columns table tables query queries index indices
assert asserts assertion expected actual mismatch equal equals differs same different exact exactly
simple small large empty missing present absent valid invalid correct wrong careful quickly slowly
compute computes computed measure measures measured count counts counted total totals average peak
memory time times second seconds minute minutes fast faster slow slower linear quadratic constant
user users model models agent agents prompt prompts system reply replies answer answers question
let me think about first check whether the test passes now then look at the remaining failure
""".split()  # noqa: SIM905 - a word list reads better as text

UNICODE_BITS = ["é", "ü", "—", "→", "中文", "日本語", "✓", "λ", "€", "…"]

CODE_NAMES = [
    "load_session", "fold_surface", "derive_messages", "parse_header", "read_events", "pack_rows",
    "expand_row", "check_seq", "build_request", "hash_body", "open_logs", "scan_frames", "apply_replace",
    "tool_result", "assistant_message", "user_message", "step_start", "turn_end", "usage_total",
    "cache_read", "render_report", "write_json", "merge_config", "validate_schema", "resolve_path",
]

SPLIT_RE = re.compile(r"\s?[A-Za-z_]+|\s?\d+|\s+|[^\sA-Za-z_\d]")


def _sentence(rng: random.Random) -> list[str]:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 22))]
    if rng.random() < 0.25:
        words[rng.randrange(len(words))] = f"`{rng.choice(CODE_NAMES)}()`"
    if rng.random() < 0.08:
        words.append(rng.choice(UNICODE_BITS))
    words[0] = words[0].capitalize()
    tokens: list[str] = []
    for i, word in enumerate(words):
        piece = word if i == 0 else " " + word
        # Providers split long words into sub-word tokens ("verb", "atim").
        if len(piece) > 7 and rng.random() < 0.3:
            cut = rng.randint(3, len(piece) - 2)
            tokens += [piece[:cut], piece[cut:]]
        else:
            tokens.append(piece)
    tokens.append(rng.choice([".", ".", ".", ",", ":", "?"]) if rng.random() < 0.9 else ".")
    return tokens


def prose_pool(rng: random.Random, n_tokens: int) -> list[str]:
    """A long run of prose-like tokens; blocks are slices of it."""
    pool: list[str] = []
    while len(pool) < n_tokens:
        pool += _sentence(rng)
        roll = rng.random()
        if roll < 0.12:
            pool.append("\n\n")
        elif roll < 0.16:
            pool += ["\n\n", "-", " " + rng.choice(WORDS), " " + rng.choice(WORDS), "\n"]
    return pool


def code_line_pool(rng: random.Random, n_lines: int) -> list[str]:
    """Source-like lines for read/grep/bash tool output."""
    templates = [
        "def {n}(self, {a}: int) -> str:",
        "    return {n}({a}, {b})",
        "    if {a} is None:",
        "        raise ValueError('{a} must be set')",
        "    for {a} in {b}:",
        "        {a} = {b}.get('{w}', 0) + 1",
        "import {w}",
        "from {w} import {n}",
        "# {w} {w2} {w3}",
        "    {a}: list[int] = []",
        "class {N}:",
        "    \"\"\"{W} the {w2} of the {w3}.\"\"\"",
        "",
    ]
    lines = []
    for _ in range(n_lines):
        names = rng.sample(CODE_NAMES, 2)
        lines.append(rng.choice(templates).format(
            n=names[0], a=rng.choice(WORDS).replace("'", ""), b=names[1], w=rng.choice(WORDS),
            w2=rng.choice(WORDS), w3=rng.choice(WORDS), N=names[0].title().replace("_", ""),
            W=rng.choice(WORDS).capitalize()))
    return lines


def split_json_tokens(text: str) -> list[str]:
    """Cut a raw JSON arguments string into provider-like fragments; the first fragment is empty as observed."""
    return ["", *SPLIT_RE.findall(text)]


def _schema(name: str, description: str, props: dict[str, tuple[str, str]], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {key: {"type": kind, "description": desc} for key, (kind, desc) in props.items()},
            "required": required,
            "additionalProperties": False,
        },
    }


def tool_schemas() -> list[dict[str, Any]]:
    """Fifteen schemas in the shape dsh logs: {name, description, parameters}."""
    s = _schema
    detail = (" The call is recorded in the session log with its arguments and its result. Prefer one precise "
              "call over several broad ones, and read the result before deciding the next step.")
    return [
        s("bash", "Run a shell command in the workspace and return its combined output and exit code." + detail,
          {"command": ("string", "The command line to run."),
           "description": ("string", "A few words saying why the command is run."),
           "timeout_ms": ("integer", "Stop the command after this many milliseconds.")}, ["command"]),
        s("read", "Read a text file with line numbers. Use offset and limit to page through long files." + detail,
          {"path": ("string", "File path, absolute or relative to the workspace."),
           "offset": ("integer", "First line to return, 1-based."),
           "limit": ("integer", "Maximum number of lines to return.")}, ["path"]),
        s("write", "Create a file or replace its whole content." + detail,
          {"path": ("string", "File path."), "content": ("string", "The complete new content.")},
          ["path", "content"]),
        s("edit", "Replace one exact occurrence of a string in a file." + detail,
          {"path": ("string", "File path."), "old_string": ("string", "Text to find; must be unique."),
           "new_string": ("string", "Replacement text.")}, ["path", "old_string", "new_string"]),
        s("glob", "List files whose path matches a glob pattern." + detail,
          {"pattern": ("string", "Glob such as src/**/*.py."), "path": ("string", "Directory to search.")},
          ["pattern"]),
        s("grep", "Search file contents with a regular expression and return matching lines." + detail,
          {"pattern": ("string", "Regular expression."), "path": ("string", "File or directory."),
           "context": ("integer", "Lines of context around each match.")}, ["pattern"]),
        s("todo_write", "Replace the task list shown to the user." + detail,
          {"todos": ("array", "Items with content and status.")}, ["todos"]),
        s("web_fetch", "Fetch a URL and return its text content." + detail,
          {"url": ("string", "The address to fetch."), "max_chars": ("integer", "Truncate after this many.")},
          ["url"]),
        s("web_search", "Search the web and return titles, addresses and snippets." + detail,
          {"query": ("string", "Search terms."), "count": ("integer", "Number of results.")}, ["query"]),
        s("subagent", "Start a child agent on a bounded task and return its final report." + detail,
          {"task": ("string", "What the child should do."), "preset": ("string", "Agent preset name.")},
          ["task"]),
        s("job_list", "List background jobs started by bash with their state." + detail, {}, []),
        s("job_output", "Return new output of a background job." + detail,
          {"job_id": ("string", "Job identifier.")}, ["job_id"]),
        s("job_kill", "Stop a background job." + detail, {"job_id": ("string", "Job identifier.")}, ["job_id"]),
        s("skill", "Load a named skill's instructions into the conversation." + detail,
          {"name": ("string", "Skill name.")}, ["name"]),
        s("ask_user", "Ask the user a question and wait for the answer." + detail,
          {"question": ("string", "The question."), "choices": ("array", "Optional fixed answers.")},
          ["question"]),
    ]


def added_tool_schema() -> dict[str, Any]:
    """The tool that a mid-session `change` header adds (e.g. a plugin loaded late)."""
    return _schema(
        "lsp_query",
        "Ask the language server for definitions, references or diagnostics at a position. The call is "
        "recorded in the session log with its arguments and its result.",
        {"path": ("string", "File path."), "line": ("integer", "1-based line."),
         "column": ("integer", "1-based column."), "kind": ("string", "definition, references or diagnostics.")},
        ["path", "line", "kind"])


def system_prompt(rng: random.Random, cwd: str, target_bytes: int = 8192) -> str:
    """A system prompt of about target_bytes: fixed guidance, an environment block, then a file listing."""
    parts = [
        "You are a coding agent working in a terminal workspace on behalf of the user.",
        "Work in small verified steps. Read before you edit, run the tests after you change code, and report "
        "what you ran and what it printed. Keep answers short and factual; do not invent results.",
        "Use the read tool to inspect files instead of printing them through the shell. Use edit for small "
        "changes and write only for new files or complete rewrites. Never change files outside the workspace.",
        "When a command fails, read its output, form a hypothesis, and test it with the smallest next step. "
        "Stop and ask the user when the task is ambiguous or when an action cannot be undone.",
        "Keep a task list with todo_write for work that has more than three steps, and update it as you go.",
        "Long outputs may be shortened in later requests; quote the exact lines you rely on in your reasoning.",
        f"# Environment\nWorking directory: {cwd}\nPlatform: linux\nShell: bash\nDate: 2026-07-30",
        "# Project files",
    ]
    text = "\n\n".join(parts)
    dirs = ["src/app", "src/app/core", "src/app/io", "tests", "tests/unit", "docs", "scripts"]
    lines: list[str] = []
    while len(text) + sum(len(x) + 1 for x in lines) < target_bytes:
        lines.append(f"- {rng.choice(dirs)}/{rng.choice(CODE_NAMES)}.py")
    return text + "\n" + "\n".join(lines)
