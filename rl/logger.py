"""Training output shared by every example: tqdm progress bar, TensorBoard, CSV, PNG curve.

Everything goes under one run directory (``runs/<name>/`` by default):
``events.out.tfevents.*`` (TensorBoard scalars), ``episodes.csv`` (one row per finished episode),
``updates.csv`` (one row per update, with the algorithm's statistics) and ``curve.png``. What an
earlier run left there is moved into ``previous-<UTC time>/`` first, never overwritten
(TensorBoard shows it as a run of its own). The CSV files are flushed at least once a second.
"""

from __future__ import annotations

import csv
import os
import time
from typing import IO, Any

import numpy as np

from rl.bookkeeping import ReturnWindow

__all__ = ["TrainingLogger"]


class TrainingLogger:
    """Records episode returns and update statistics. Call from the training thread only."""

    def __init__(
        self,
        run_dir: str,
        total_steps: int,
        window: int = 20,
        tensorboard: bool = True,
        progress: bool = True,
    ) -> None:
        self.run_dir = run_dir
        self.window = window
        os.makedirs(run_dir, exist_ok=True)
        self.previous = _move_earlier_run(run_dir)
        """Where an earlier run's outputs in ``run_dir`` were moved, or ``None``."""
        self._start = time.perf_counter()
        self._returns = ReturnWindow(window)
        self.steps: list[int] = []
        """Env step at which each episode finished (for the curve)."""
        self.returns: list[float] = []
        """Every finished episode's return, in order."""
        self._writer: Any = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(run_dir)
        self._episodes_file: IO[str] = open(os.path.join(run_dir, "episodes.csv"), "w", newline="")
        self._episodes_csv = csv.writer(self._episodes_file)
        self._episodes_csv.writerow(["env_step", "wall_s", "return", "length"])
        self._updates_file: IO[str] = open(os.path.join(run_dir, "updates.csv"), "w", newline="")
        self._updates_csv: csv.DictWriter[str] | None = None
        self._bar: Any = None
        if progress:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, unit="step", dynamic_ncols=True, mininterval=0.5)
        self._last_step = 0
        self._flushed = time.monotonic()
        if self.previous is not None:
            self.note(f"an earlier run's logs in {run_dir} were moved to {self.previous}")

    @property
    def mean_return(self) -> float:
        """Mean return of the last ``window`` episodes (``nan`` before the first one)."""
        return self._returns.mean

    @property
    def wall_s(self) -> float:
        """Seconds since the logger was created."""
        return time.perf_counter() - self._start

    def log_episodes(self, step: int, returns: np.ndarray, lengths: np.ndarray) -> None:
        """Record episodes that finished by env step ``step``."""
        wall = self.wall_s
        self._returns.add(returns)
        for r, n in zip(returns.tolist(), lengths.tolist(), strict=True):
            self.steps.append(step)
            self.returns.append(r)
            self._episodes_csv.writerow([step, f"{wall:.3f}", r, n])
            if self._writer is not None:
                self._writer.add_scalar("episode/return", r, step)
                self._writer.add_scalar("episode/length", n, step)
        self._flush_now_and_then()

    def log_update(self, step: int, stats: dict[str, float], postfix: dict[str, Any] | None = None) -> None:
        """Record one update's statistics and advance the progress bar to ``step``.

        ``postfix``: more fields for the progress line (e.g. frames/s and weight lag).
        """
        row = {"env_step": step, "wall_s": round(self.wall_s, 3), "mean_return": self.mean_return, **stats}
        if self._updates_csv is None:
            self._updates_csv = csv.DictWriter(self._updates_file, fieldnames=list(row), extrasaction="ignore")
            self._updates_csv.writeheader()
        self._updates_csv.writerow(row)
        if self._writer is not None:
            for k, v in stats.items():
                self._writer.add_scalar(f"train/{k}", v, step)
            if len(self._returns):
                self._writer.add_scalar(f"episode/mean_return_{self.window}", self.mean_return, step)
        if self._bar is not None:
            self._bar.update(step - self._last_step)
            self._bar.set_postfix(ret=f"{self.mean_return:.1f}", **(postfix or {}), refresh=False)
        self._last_step = step
        self._flush_now_and_then()

    def _flush_now_and_then(self) -> None:
        """The CSV rows reach the files at least once a second (a killed run keeps them)."""
        now = time.monotonic()
        if now - self._flushed >= 1.0:
            self._flushed = now
            self._episodes_file.flush()
            self._updates_file.flush()

    def note(self, message: str) -> None:
        """A one-off event for the user (a worker replaced, say), printed above the progress line."""
        if self._bar is not None:
            self._bar.write(message)
        else:
            import sys

            print(message, file=sys.stderr, flush=True)

    def plot(self, title: str, solved_return: float | None = None) -> str:
        """Write ``curve.png`` (episode returns and their running mean) and return its path."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        path = os.path.join(self.run_dir, "curve.png")
        fig, ax = plt.subplots(figsize=(7, 4))
        if self.returns:
            r = np.asarray(self.returns)
            ax.plot(self.steps, r, ".", alpha=0.3, ms=3, label="episode return")
            k = min(self.window, len(r))
            running = np.convolve(r, np.ones(k) / k, mode="valid")
            ax.plot(self.steps[k - 1 :], running, label=f"mean of last {k}")
        if solved_return is not None:
            ax.axhline(solved_return, color="gray", ls="--", lw=1, label="solved")
        ax.set_xlabel("environment steps")
        ax.set_ylabel("return")
        ax.set_title(title)
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path

    def close(self) -> None:
        """Flush and close the files, the TensorBoard writer and the progress bar."""
        if self._bar is not None:
            self._bar.close()
        if self._writer is not None:
            self._writer.close()
        self._episodes_file.close()
        self._updates_file.close()


_OUTPUTS = ("episodes.csv", "updates.csv", "curve.png")


def _move_earlier_run(run_dir: str) -> str | None:
    """Move what an earlier run wrote in ``run_dir`` into a ``previous-<UTC time>`` folder in it."""
    names = [n for n in os.listdir(run_dir) if n in _OUTPUTS or n.startswith("events.out.tfevents.")]
    if not names:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    target = os.path.join(run_dir, f"previous-{stamp}")
    n = 1
    while os.path.exists(target):
        n += 1
        target = os.path.join(run_dir, f"previous-{stamp}-{n}")
    os.makedirs(target)
    for name in names:
        os.replace(os.path.join(run_dir, name), os.path.join(target, name))
    return target
