"""PARL's ``parl.utils.logger``: a ``logging`` logger named ``PARL`` that prints to stdout as
``[MM-DD HH:MM:SS thread @file:line] message`` (warnings ``WRN``, errors ``ERR``; coloured on
a terminal), and a log directory (``set_dir``, ``auto_set_dir``) whose ``log.log`` gets the same
lines and where ``summary`` writes its TensorBoard files.

``logger.info(...)`` and the other levels are the logger's own methods, so each line names the
caller's file and line. As in PARL, ``set_dir`` empties the folder it is given, and a script's
first import says its ``Argv``.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from datetime import datetime

__all__ = [
    "CRITICAL",
    "DEBUG",
    "ERROR",
    "INFO",
    "WARNING",
    "add_stdout_handler",
    "auto_set_dir",
    "critical",
    "debug",
    "error",
    "exception",
    "get_dir",
    "info",
    "remove_handler",
    "setLevel",
    "set_dir",
    "set_level",
    "warn",
    "warning",
]

DEBUG, INFO, WARNING, ERROR, CRITICAL = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL

_COLOURS = {logging.DEBUG: "34", logging.INFO: "32", logging.WARNING: "33", logging.ERROR: "31", logging.CRITICAL: "31"}
_TAGS = {logging.DEBUG: "DEBUG ", logging.WARNING: "WRN ", logging.ERROR: "ERR ", logging.CRITICAL: "ERR "}


class _Formatter(logging.Formatter):
    """PARL's line: ``[time thread @file:line] TAG message``, coloured when ``colour``."""

    def __init__(self, colour: bool) -> None:
        super().__init__(datefmt="%m-%d %H:%M:%S")
        self.colour = colour

    def format(self, record: logging.LogRecord) -> str:
        head = f"[{self.formatTime(record, self.datefmt)} {record.threadName} @{record.filename}:{record.lineno}]"
        tag = _TAGS.get(record.levelno, "")
        if self.colour:
            code = _COLOURS.get(record.levelno, "32")
            head = f"\033[{code}m{head}\033[0m"
            tag = f"\033[{code}m{tag}\033[0m" if tag else ""
        line = f"{head} {tag}{record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _stdout_handler() -> logging.Handler:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_Formatter(colour=sys.stdout.isatty()))
    return handler


_logger = logging.getLogger("PARL")
_logger.propagate = False
_logger.setLevel(logging.DEBUG)
if not _logger.handlers:
    _logger.addHandler(_stdout_handler())

LOG_DIR: str | None = None
_file_handler: logging.Handler | None = None

debug = _logger.debug
info = _logger.info
warning = _logger.warning
warn = _logger.warning
error = _logger.error
critical = _logger.critical
exception = _logger.exception
setLevel = _logger.setLevel  # PARL exports it under logging's name


def get_dir() -> str | None:
    """The log directory (``set_dir``, ``auto_set_dir``), or None."""
    return LOG_DIR


def set_level(level: int | str) -> None:
    _logger.setLevel(level)


def _use_dir(dirname: str) -> None:
    """Log to ``dirname/log.log`` from now on (the file started afresh)."""
    global LOG_DIR, _file_handler
    if _file_handler is not None:
        _logger.removeHandler(_file_handler)
        _file_handler.close()
        _file_handler = None
    os.makedirs(dirname, exist_ok=True)
    LOG_DIR = dirname
    handler = logging.FileHandler(os.path.join(dirname, "log.log"), mode="w", encoding="utf-8")
    handler.setFormatter(_Formatter(colour=False))
    _file_handler = handler
    _logger.addHandler(handler)


def set_dir(dirname: str) -> None:
    """Make ``dirname`` the log directory: emptied first (as PARL does), then ``log.log`` there
    gets every line, and ``summary`` writes there."""
    if _file_handler is not None:  # closed first, so that the folder can go
        _logger.removeHandler(_file_handler)
        _file_handler.close()
    shutil.rmtree(dirname, ignore_errors=True)
    _use_dir(dirname)


def auto_set_dir(action: str | None = None) -> str:
    """Make ``train_log/<script name>`` the log directory and return it. If it holds files,
    ``action`` says what to do (asked on the terminal when None, as PARL does): ``d`` empty it,
    ``k`` keep it, ``n`` use a new one with the time in its name; anything else raises OSError."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or ""
    base = os.path.splitext(os.path.basename(path))[0]
    dirname = os.path.normpath(os.path.join("train_log", base))
    if os.path.isdir(dirname) and any(not name.startswith(".") for name in os.listdir(dirname)):
        if not action:
            warning(f"Log directory {dirname} exists! Use 'd' to delete it. ")
            warning("If you're resuming from a previous run, you can choose to keep it.\nPress any other key to exit. ")
        while not action:
            action = input("Select Action: k (keep) / d (delete) / q (quit):").lower().strip()
        if action == "d":
            if _file_handler is not None and LOG_DIR == dirname:
                _logger.removeHandler(_file_handler)
                _file_handler.close()
            shutil.rmtree(dirname, ignore_errors=True)
        elif action == "n":
            dirname += datetime.now().strftime("%m%d-%H%M%S")
            info(f"Use a new log directory {dirname}")
        elif action != "k":
            raise OSError(f"Directory {dirname} exits!")
    _use_dir(dirname)
    return dirname


def add_stdout_handler() -> logging.Handler:
    """Another stdout handler (each line printed once more); ``remove_handler`` takes it off."""
    handler = _stdout_handler()
    _logger.addHandler(handler)
    return handler


def remove_handler(handler: logging.Handler) -> None:
    _logger.removeHandler(handler)


def _say_argv() -> None:
    """PARL's first line in a script's output: its command line (not in actor hosts)."""
    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None) and not os.environ.get("ACTORRT_ACTOR_ID"):
        info("Argv: " + " ".join(sys.argv))


_say_argv()
