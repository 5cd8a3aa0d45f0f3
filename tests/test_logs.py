"""Anything unexpected is one line for the writer and a traceback in the rotating log."""

from __future__ import annotations

from swiftwriter import cli, logs


def test_an_unexpected_cli_error_is_one_line_and_a_logged_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SWIFTWRITER_LOG_DIR", str(tmp_path / "logs"))

    def broken(args):
        raise RuntimeError("the flux capacitor is empty")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    args = parser.parse_args(["models", "list"])
    monkeypatch.setattr(args, "func", broken, raising=False)
    monkeypatch.setattr(parser, "parse_args", lambda argv=None: args)
    assert cli.main(["models", "list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "RuntimeError: the flux capacitor is empty" in err and "swiftwriter.log" in err
    text = (tmp_path / "logs" / "swiftwriter.log").read_text(encoding="utf-8")
    assert "Traceback" in text and "in broken" in text


def test_a_failing_worker_logs_its_traceback(tmp_path, monkeypatch, qtbot):
    monkeypatch.setenv("SWIFTWRITER_LOG_DIR", str(tmp_path / "logs"))
    from swiftwriter.ui.stoppable import StoppableWorker

    class Broken(StoppableWorker):
        what = "test job"

        def _run(self):
            raise ValueError("bad value deep inside")

    worker = Broken()
    messages = []
    worker.failed.connect(messages.append)
    worker.run()
    assert messages[0].startswith("The test job failed unexpectedly: ValueError: bad value")
    assert "Traceback" in (tmp_path / "logs" / logs.LOG_NAME).read_text(encoding="utf-8")


def test_a_runs_steps_reach_the_log_at_debug_level(tiny_llama, caplog):
    """The engine logs a run's start, every STEP_LOG_EVERY-th step and its end (a bug report's
    path through the engine), and writing runs together says so."""
    import logging

    from swiftwriter.engine import DraftSettings, Generator, SamplingSettings
    from swiftwriter.engine.decoding import run

    gen = Generator(tiny_llama, SamplingSettings(greedy=True), DraftSettings.plain(),
                    calibrate=False)  # fmt: skip
    with caplog.at_level(logging.DEBUG, logger="swiftwriter.engine"):
        list(gen.generate([5, 6, 7], run.STEP_LOG_EVERY + 1))
        list(gen.generate_together([5, 6, 7], 3, [1, 2]))
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("run start: 3 prompt tokens prefilled") for line in lines)
    assert any(line.startswith(f"step {run.STEP_LOG_EVERY}:") for line in lines)
    assert any(line.startswith("run end (length)") for line in lines)
    assert any(line.startswith("2 runs written together") for line in lines)
    assert any("prompt tokens copied" in line for line in lines)


def test_a_line_the_writer_must_see_goes_to_the_log_and_once_to_stderr(caplog, capsys):
    import logging

    from swiftwriter import logs

    logger = logging.getLogger("swiftwriter.engine.passes.native")
    with caplog.at_level(logging.DEBUG, logger="swiftwriter"):
        logs.say(logger, "tree-attention kernel unavailable (no C++ compiler)")
    assert [(r.name, r.levelname) for r in caplog.records] == [(logger.name, "WARNING")]
    err = capsys.readouterr().err
    assert err == "swiftwriter: tree-attention kernel unavailable (no C++ compiler)\n"


def test_other_warnings_still_reach_stderr_while_no_log_is_set_up(capsys):
    """Before the console handler, Python's last resort printed the modules' warnings (a
    damaged drafting cache rebuilt): they still do, as they were."""
    import logging

    from swiftwriter import logs

    root, kept = logging.getLogger(), logging.getLogger().handlers[:]
    own = [h for h in logs.log.handlers if h is not logs._console]
    for handler in [*kept]:
        root.removeHandler(handler)
    for handler in own:
        logs.log.removeHandler(handler)
    try:
        logging.getLogger("swiftwriter.writing.session").warning("the drafting cache was rebuilt")
        logging.getLogger("swiftwriter.writing.session").info("not this")
    finally:
        for handler in kept:
            root.addHandler(handler)
        for handler in own:
            logs.log.addHandler(handler)
    assert capsys.readouterr().err == "the drafting cache was rebuilt\n"
