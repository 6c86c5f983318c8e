"""PARL's ``CSVLogger``: dicts written as the rows of a CSV file, the first one's keys the header."""

from __future__ import annotations

import csv
import threading
from typing import Any

__all__ = ["CSVLogger"]


class CSVLogger:
    """``CSVLogger(path)``; ``log_dict({"loss": 1, "reward": 2})`` writes a row (the first call
    the header too); every later dict must have the same keys (``AssertionError``, as PARL).
    Thread-safe."""

    def __init__(self, output_file: str) -> None:
        self.output_file = open(output_file, "w", newline="")  # closed by close(), or when collected
        self.csv_writer: csv.DictWriter[str] | None = None
        self.keys_set: set[str] | None = None
        self.lock = threading.Lock()

    def log_dict(self, result: dict[str, Any]) -> None:
        with self.lock:
            assert isinstance(result, dict), "the input should be a dict."
            if self.csv_writer is None:
                self.csv_writer = csv.DictWriter(self.output_file, list(result))
                self.csv_writer.writeheader()
                self.keys_set = set(result)
            assert set(result) == self.keys_set, "The keys of the dict should be the same as before."
            self.csv_writer.writerow(result)

    def flush(self) -> None:
        with self.lock:
            self.output_file.flush()

    def close(self) -> None:
        with self.lock:
            if not self.output_file.closed:
                self.output_file.close()

    def __del__(self) -> None:
        output = getattr(self, "output_file", None)
        if output is not None and not output.closed:
            output.close()
