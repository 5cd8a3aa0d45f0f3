"""A tokenizer whose own (Rust) code panics on a text: its pre-tokenizer pattern `(a+)+$`
backtracks past the regex engine's limit on 'aaa...ab'. pyo3 raises that as a PanicException,
which is no Exception: it must still end as one line, in the engine, the CLI and the app's
workers, and Rust's own report of it must not reach the terminal."""

from __future__ import annotations

import os

import pytest
from swiftwriter.engine.decoding.textgen import encode
from swiftwriter.errors import UserError, is_native_panic

HOSTILE = "a" * 100 + "b"


@pytest.fixture(scope="module")
def panicking():
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({"a": 0, "b": 1, "<unk>": 2}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("(a+)+$"), "isolated")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>")
    tokenizer.name_or_path = "/models/backtracking"
    return tokenizer


def test_encode_says_it_in_one_line_and_rusts_report_is_dropped(panicking, capfd):
    assert encode(panicking, "a b") == panicking.encode("a b", add_special_tokens=False)
    with pytest.raises(UserError) as caught:
        encode(panicking, HOSTILE)
    assert str(caught.value) == (
        "The tokenizer of /models/backtracking failed on this text: "
        "Onig: Regex search error: retry-limit-in-match over"
    )
    assert capfd.readouterr().err == ""  # before: Rust's panic report (and a backtrace)
    assert encode(panicking, "b a") == panicking.encode("b a", add_special_tokens=False)


def test_what_a_tokenizer_writes_to_stderr_otherwise_gets_through(capfd):
    class Chatty:
        def encode(self, text, add_special_tokens=False):
            os.write(2, b"a warning from native code\n")
            return [len(text)]

    assert encode(Chatty(), "four") == [4]
    assert capfd.readouterr().err == "a warning from native code\n"


def panic_of(tokenizer) -> BaseException:
    try:
        tokenizer.backend_tokenizer.encode(HOSTILE)
    except BaseException as exc:  # noqa: BLE001 - the panic itself is what is wanted
        return exc
    raise AssertionError("no panic")


def test_a_panic_is_recognised_and_is_no_exception(panicking):
    panic = panic_of(panicking)
    assert is_native_panic(panic) and not isinstance(panic, Exception)
    assert not is_native_panic(KeyboardInterrupt()) and not is_native_panic(ValueError())


def test_a_panic_in_a_command_is_one_line(panicking, monkeypatch, capsys, tmp_path):
    from swiftwriter.cli import main
    from swiftwriter.commands import project
    from swiftwriter.store import Project

    Project.create(tmp_path / "Novel.swiftwriter", title="Novel").close()
    panic = panic_of(panicking)

    def panics(proj, args):
        raise panic

    monkeypatch.setattr(project, "_docs", panics)
    assert main(["project", "docs", str(tmp_path / "Novel.swiftwriter")]) == 1
    err = capsys.readouterr().err.strip()  # before: the panic left main() with its traceback
    assert err.startswith("swiftwriter: project failed unexpectedly: PanicException: Onig")
    assert "\n" not in err


def test_a_panic_in_an_apps_worker_is_its_failure_message(panicking, qtbot):
    from swiftwriter.ui.stoppable import StoppableWorker

    class Tokenizing(StoppableWorker):
        what = "take"

        def _run(self):
            panicking.backend_tokenizer.encode(HOSTILE)

    worker = Tokenizing()
    failed, finished = [], []
    worker.failed.connect(failed.append)
    worker.finished.connect(lambda: finished.append(True))
    worker.run()  # before: the panic left the worker's thread, and no message was shown
    assert failed[0].startswith("The take failed unexpectedly: PanicException: Onig")
    assert finished == [True]
