"""The app's log: a rotating file in the platform's log folder. A failure a writer can cause
gets one clear line on screen; anything unexpected gets that line plus its traceback here, so
it can be reported (Help > Show log folder).

Every module logs through its own `logging.getLogger(__name__)`, below the "swiftwriter" logger
set up here; the debug lines on the paths a bug report needs (model load, dtype and kernel
choice, each take's settings and outcome, project open, save and backup) reach the file too."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

import platformdirs

from swiftwriter.paths import APP_NAME, own_folder

LOG_NAME = "swiftwriter.log"
log = logging.getLogger("swiftwriter")


def log_dir() -> Path:
    """SWIFTWRITER_LOG_DIR overrides the platform's folder (tests, portable installs)."""
    override = os.environ.get("SWIFTWRITER_LOG_DIR")
    return (
        Path(override) if override else Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))
    )


def log_file() -> Path:
    return log_dir() / LOG_NAME


def setup() -> Path | None:
    """Send the app's log to the rotating file (1 MB, five old files); once per folder. A
    folder that cannot be written only means no log (returns None)."""
    path = log_file()
    for handler in list(log.handlers):
        if getattr(handler, "baseFilename", None) == str(path):
            return path
        if isinstance(handler, logging.handlers.RotatingFileHandler):  # an earlier folder
            log.removeHandler(handler)
            handler.close()
    try:
        own_folder(path.parent)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=1 << 20, backupCount=5, encoding="utf-8"
        )
    except OSError:
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    return path


class ConsoleLines(logging.Handler):
    """Records marked for the console (`say`) as one "swiftwriter: ..." line on stderr, read
    at each write (so a test's captured stream, or a child's, gets it). Other warnings go to
    stderr as Python's last resort would have put them there while no log is set up (this
    handler being there, the last resort no longer is)."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "console", False):
            print(f"swiftwriter: {record.getMessage()}", file=sys.stderr, flush=True)
        elif record.levelno >= logging.WARNING and not self._others():
            print(record.getMessage(), file=sys.stderr, flush=True)

    def _others(self) -> bool:
        """Whether another handler takes the record (the log file, or the root's)."""
        return any(h is not self for h in log.handlers) or bool(logging.getLogger().handlers)


_console = ConsoleLines()
log.addHandler(_console)


def say(logger: logging.Logger, message: str) -> None:
    """A line the writer must see wherever SwiftWriter runs (a kernel that could not be built,
    a model converted again): logged as a warning through the module's own logger, and shown
    once on stderr."""
    logger.warning(message, extra={"console": True})


def unexpected(what: str, exc: BaseException) -> str:
    """Log an unexpected failure with its traceback; returns the one line to show."""
    path = setup()
    log.error("%s failed", what, exc_info=(type(exc), exc, exc.__traceback__))
    where = f" (details in {path})" if path else ""
    return f"{what} failed unexpectedly: {type(exc).__name__}: {exc}{where}"
