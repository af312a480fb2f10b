"""Every view that cuts text short cuts it on whole characters (dsh_audit.text.clip): never inside a CJK
character's UTF-8, between a base and its combining marks, inside an emoji's ZWJ sequence, skin tone or tag
sequence, or between a flag's two regional indicators; and, where the view measures terminal cells, within the
cells it has."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from dsh_audit.cli import exit_code_for, main
from dsh_audit.explain import EXCERPT, _excerpt
from dsh_audit.readers.home import SessionInfo
from dsh_audit.reports.header_diff import _short as header_short
from dsh_audit.reports.html_plot import tip_text
from dsh_audit.reports.sessions_view import cells as _cells
from dsh_audit.reports.views import Column, fit, table, wrap
from dsh_audit.text import clip, first_character, head, is_boundary, tail
from dsh_audit.vocabulary import _short as vocabulary_short
from logbuilder import LogBuilder
from test_cache_report import TOOL_A, write_jsonl

WILD = Path(__file__).parent / "fixtures/wild/lyteboat-boat/examples/agents/finance/evals/baseline/sessions"
CJK = "查看用户的资料和文件"
ZWJ = "👩\u200d💻👨\u200d👩\u200d👧\u200d👦"
FLAGS = "🇫🇷🇩🇪🇯🇵"
SKIN = "👍🏽"
COMBINING = "e\u0301a\u0308\u0323n\u0303"
KEYCAP = "1\ufe0f\u20e3"
SCOTLAND = "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
MIXED = f"{CJK}{ZWJ}{FLAGS}{COMBINING}{SKIN}{KEYCAP}{SCOTLAND}ok"
SAMPLES = [CJK, ZWJ, FLAGS * 3, SKIN * 4, COMBINING * 3, KEYCAP * 3, SCOTLAND * 2, MIXED]
# Each sample's characters as a reader sees them: what a cut may never split.
CHARACTERS = {CJK: list(CJK), ZWJ: ["👩\u200d💻", "👨\u200d👩\u200d👧\u200d👦"], FLAGS: ["🇫🇷", "🇩🇪", "🇯🇵"],
              COMBINING: ["e\u0301", "a\u0308\u0323", "n\u0303"], SKIN: [SKIN], KEYCAP: [KEYCAP],
              SCOTLAND: [SCOTLAND]}


def whole_at(text: str, start: int, end: int) -> bool:
    return is_boundary(text, start) and is_boundary(text, end)


def assert_whole_piece(original: str, piece: str) -> None:
    """`piece` occurs in `original` starting and ending on whole characters, at one of its occurrences."""
    assert "\ufffd" not in piece
    starts = [at for at in range(len(original) - len(piece) + 1) if original.startswith(piece, at)]
    assert any(whole_at(original, at, at + len(piece)) for at in starts), (original, piece)


def assert_cut(original: str, shown: str, *, keep_end: bool = False, mark: str = "…") -> None:
    if shown in (original, mark[:0]):   # whole, or nothing where not even the mark fits
        return
    if keep_end:
        assert shown.startswith(mark)
        body = shown[len(mark):]
        assert original.endswith(body) and is_boundary(original, len(original) - len(body)), (original, shown)
    else:
        assert shown.endswith(mark)
        body = shown[:-len(mark)] if mark else shown
        assert original.startswith(body) and is_boundary(original, len(body)), (original, shown)


@pytest.mark.parametrize("sample", list(CHARACTERS))
def test_a_reader_s_characters_are_the_units_of_a_cut(sample: str) -> None:
    units = CHARACTERS[sample]
    boundaries = [sum(map(len, units[:n])) for n in range(len(units) + 1)]
    assert [at for at in range(len(sample) + 1) if is_boundary(sample, at)] == boundaries
    assert first_character(sample) == units[0]


@pytest.mark.parametrize("sample", SAMPLES)
@pytest.mark.parametrize("cells", [False, True])
def test_clip_head_and_tail_keep_characters_whole_within_the_limit(sample: str, cells: bool) -> None:
    size = cell_len if cells else len
    for limit in range(len(sample) * 2 + 2):
        for keep_end in (False, True):
            shown = clip(sample, limit, cells=cells, keep_end=keep_end)
            assert size(shown) <= limit
            assert_cut(sample, shown, keep_end=keep_end)
        start, end = head(sample, limit, cells=cells), tail(sample, limit, cells=cells)
        assert size(start) <= limit and size(end) <= limit
        assert sample.startswith(start) and is_boundary(sample, len(start))
        assert sample.endswith(end) and is_boundary(sample, len(sample) - len(end))
    assert clip(sample, cell_len(sample) if cells else len(sample), cells=cells) == sample


@pytest.mark.parametrize("sample", SAMPLES)
def test_terminal_cells_fit_and_tables_cut_on_whole_characters(sample: str) -> None:
    for width in range(1, 24):
        for keep_end in (False, True):
            shown = fit(sample, width, keep_end=keep_end)
            assert cell_len(shown) <= width
            assert_cut(sample, shown, keep_end=keep_end)
    rows = [{"name": "a", "text": sample * 3}]
    columns = [Column("name", lambda r: r["name"]), Column("text", lambda r: r["text"], squeeze=True)]
    for width in range(12, 40):
        *_, line = table(rows, columns, width=width, wide=False)
        assert cell_len(line) <= width
        assert_cut(sample * 3, line.split("  ", 2)[-1].strip())


@pytest.mark.parametrize("sample", SAMPLES)
def test_wrap_splits_a_long_word_between_whole_characters(sample: str) -> None:
    word = sample * 6
    for width in (20, 23, 31):
        lines = wrap(word, width, indent="")
        assert all(cell_len(line) <= width for line in lines)
        pieces = [line.strip() for line in lines]
        assert "".join(pieces) == word
        at = 0
        for piece in pieces:
            assert whole_at(word, at, at + len(piece)), (word, piece)
            at += len(piece)


@pytest.mark.parametrize("sample", SAMPLES)
def test_explain_excerpts_keep_characters_whole_at_every_byte_offset(sample: str) -> None:
    text = f'{{"role":"user","content":"{sample * 8}"}}'
    data = text.encode()
    for offset in range(len(data) + 1):
        excerpt = _excerpt(data, offset)
        body = excerpt.removeprefix("…").removesuffix("…")
        assert len(body) <= 2 * EXCERPT
        assert_whole_piece(text, body)


def test_explain_shows_the_wild_log_s_chinese_text_whole() -> None:
    log = WILD / "overview-then-diagnosis/session.v4.jsonl"
    result = CliRunner().invoke(main, ["explain", str(log), "2.1#1", "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    assert "\ufffd" not in result.output
    assert "查看" in CliRunner().invoke(main, ["explain", str(log), "2.1#1", "--color", "never"]).output


@pytest.mark.parametrize("sample", SAMPLES)
def test_html_labels_header_diff_and_schema_messages_cut_on_whole_characters(sample: str) -> None:
    long = sample * 12
    for limit in (3, 10, 25, 40):
        assert_cut(long, tip_text(long, limit))
    assert_cut(f'"{long}"', header_short(long, 20))   # a header value shown as JSON
    assert_cut(f'"{long}"', vocabulary_short(long))


def test_an_internal_error_s_message_is_cut_on_whole_characters(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code_for(RuntimeError(MIXED * 40)) == 3
    said = capsys.readouterr().err
    message = said.split("RuntimeError: ", 1)[1].split(" — please report", 1)[0]
    assert len(message) <= 300
    assert_cut(MIXED * 40, message)


def test_the_sessions_table_cuts_an_id_on_whole_characters() -> None:
    info = SessionInfo("session-" + ZWJ * 3 + CJK, Path("s.jsonl"), Path("."), None, 4, 1,
                       datetime(2026, 1, 1, tzinfo=UTC))
    shown = _cells(info)["id"]
    assert_cut(ZWJ * 3 + CJK, shown, mark="")


def assert_lines_keep_characters_whole(out: str) -> None:
    """No line of a view starts with what belongs to the character before it, or ends inside a ZWJ sequence or
    a flag: every cut and every wrap fell between whole characters."""
    assert "\ufffd" not in out
    for line in out.splitlines():
        text = line.strip()
        if text:
            assert is_boundary("x" + text, 1) and text[-1] != "\u200d", line
            runs = [len(run) for run in "".join(c if "\U0001f1e6" <= c <= "\U0001f1ff" else " " for c in text).split()]
            assert all(run % 2 == 0 for run in runs), line


@pytest.mark.parametrize("columns", ["40", "57", "80"])
def test_header_diff_s_wrapped_system_prompt_keeps_characters_whole(columns: str, tmp_path: Path) -> None:
    log = LogBuilder()
    log.header_event("initial", system=MIXED * 6, tools=[TOOL_A])
    log.header_event("change", system=MIXED * 5 + "\n" + MIXED, tools=[TOOL_A])
    path = write_jsonl(log, tmp_path / "session.jsonl")
    result = CliRunner().invoke(main, ["header-diff", str(path), "--color", "never"], env={"COLUMNS": columns})
    assert result.exit_code == 0 and "system prompt changed" in result.stdout
    assert_lines_keep_characters_whole(result.stdout)
