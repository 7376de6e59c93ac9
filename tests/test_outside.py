"""Outside text as data (harness/outside.py): one line, escaped, defused, redacted; the command line's streams
redacted; and the one way to write a file (harness/safeio.py): never through a link, the mode kept."""

from __future__ import annotations

import io
import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cli import main
from harness.outside import RedactingStream, redact, secret, shown
from harness.safeio import OutputError, open_to_write, output_path, write_atomic

SECRETS = [
    ("https://alice:s3cr3t-pass@submitter.example:8080/api", "s3cr3t-pass"),
    ("ray://tok3nvalue99@head:10001", "tok3nvalue99"),
    ("Authorization: Bearer eyJhbGciOi.payload.sig", "eyJhbGciOi.payload.sig"),
    ("the dashboard said: token 0123456789abcdef is not valid", "0123456789abcdef"),
    ("RAY_AUTH_TOKEN=feedface12345678 ray start", "feedface12345678"),
    ('{"auth_token": "zz-top-secret", "max_tokens": 512}', "zz-top-secret"),
    ("push with ghp_" + "A1b2" * 9, "ghp_" + "A1b2" * 9),
    ("X-Api-Key: k-123456789", None),  # not a secret name this module knows: left as it is
]


@pytest.mark.parametrize(("text", "hidden"), SECRETS)
def test_a_credential_is_never_shown(text: str, hidden: str | None) -> None:
    out = redact(text)
    if hidden is None:
        assert out == text
    else:
        assert hidden not in out and "***" in out
        assert hidden not in shown(text)


def test_numbers_and_prose_near_secret_words_are_kept() -> None:
    for text in ("max_tokens=512", "tokens_per_second=3.5", "unclosed token: line 1, column 53",
                 "token authentication failed", '"token": 5', "token_budget=abc"):  # fmt: skip
        assert redact(text) == text


def test_a_value_given_or_in_a_secret_variable_is_masked_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    secret("a-ray-token-read-from-a-file")
    monkeypatch.setenv("HISTORY_PUSH_TOKEN", "plain-words-but-secret")
    text = "HTTP 401: expected a-ray-token-read-from-a-file; got plain-words-but-secret"
    assert redact(text) == "HTTP 401: expected ***; got ***"
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to mask by value: it would mask words
    assert redact("abc def") == "abc def"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("::error title=all good::merge it", "\\::error title=all good::merge it"),
        ("  ::warning::x", "\\  ::warning::x"),
        ("fix\n::error::forged", "fix\\n::error::forged"),
        ("a ##[error]legacy form", "a #\\#[error]legacy form"),
        ("\x1b[2J\rclear", "\\x1b[2J\\rclear"),
        ("next\u2028line", "next\\u2028line"),
    ],
)
def test_a_field_is_one_line_that_no_runner_reads_as_a_command(text: str, line: str) -> None:
    assert shown(text) == line


@given(st.text())
def test_shown_is_one_printable_line_without_a_workflow_command(text: str) -> None:
    line = shown(text, 120)
    assert "\n" not in line and "\r" not in line and len(line) <= 120
    assert not re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", line)
    assert not line.lstrip().startswith("::") and "##[" not in line


@given(st.text())
def test_redaction_is_idempotent(text: str) -> None:
    assert redact(redact(text)) == redact(text)


def test_the_stream_redacts_a_line_written_in_pieces() -> None:
    inner = io.StringIO()
    stream = RedactingStream(inner)  # type: ignore[arg-type]
    stream.write("at https://u:hunt")
    stream.write("er22@host/ ok\npartial RAY_AUTH_TOKEN=abcdef1234")
    assert inner.getvalue() == "at https://***@host/ ok\n"
    stream.flush()
    assert inner.getvalue().endswith("partial RAY_AUTH_TOKEN=***")


def test_the_command_line_prints_no_credential(capsys: pytest.CaptureFixture[str]) -> None:
    """Whichever module prints the line: here the Ray address's own check, which quotes what it refuses."""
    root = Path(__file__).resolve().parents[1]
    code = main(["dry-run", str(root / "scenarios/two_nodes_fsdp_l1.yaml"), "--ray-address", "http://bob:pa55word@h:8265"])
    err = capsys.readouterr().err
    assert code == 2 and "pa55word" not in err and "'http://***@h:8265' is not the address" in err


# --- the one way to write a file ---------------------------------------------------------------------------------


def test_a_replaced_file_keeps_its_mode_and_a_new_one_gets_the_umasks(tmp_path: Path) -> None:
    kept = tmp_path / "history.json"
    kept.write_text("{}")
    kept.chmod(0o644)
    write_atomic(kept, "[]")
    with open_to_write(kept, append=True) as f:
        f.write("\n")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o644 and kept.read_text() == "[]\n"
    mask = os.umask(0o027)
    try:
        write_atomic(tmp_path / "new.json", "1")
        with open_to_write(tmp_path / "new.log") as f:
            f.write("x")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "new.log").stat().st_mode) == 0o640


@pytest.mark.parametrize("append", [False, True])
def test_a_link_is_never_written_through(tmp_path: Path, append: bool) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, target in (("dangling", outside / "created"), ("live", outside / "kept")):
        (outside / "kept").write_text("kept")
        (tmp_path / name).symlink_to(target)
        with pytest.raises(OutputError, match=rf"{name}: a symbolic link: files are written in place"):
            open_to_write(tmp_path / name, append=append)
    assert sorted(p.name for p in outside.iterdir()) == ["kept"] and (outside / "kept").read_text() == "kept"


def test_a_fifo_and_a_directory_are_one_line_each(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    with pytest.raises(OutputError, match="fifo: cannot write"):
        open_to_write(tmp_path / "fifo")
    with pytest.raises(OutputError, match="dir: cannot write"):
        write_atomic(tmp_path / "dir", "x")


def test_an_output_named_by_a_dangling_link_is_refused_not_created_where_it_points(tmp_path: Path) -> None:
    (tmp_path / "history.json").symlink_to(tmp_path / "elsewhere" / "made.json")
    with pytest.raises(OutputError, match=r"HISTORY .*history.json: a symbolic link"):
        output_path(tmp_path / "history.json", "HISTORY")
    assert not (tmp_path / "elsewhere").exists()
