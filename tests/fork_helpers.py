"""Shared by the tests of processes forked from a connected one (tests/client/test_forked_children.py,
tests/compat/test_parl_forked_children.py): the driver scripts fork with ``fork_and_wait``, the
tests read what became of the children with ``children_all_right``."""

from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
from collections.abc import Callable
from typing import Any


def fork_and_wait(work: Callable[[int], int], expected: Callable[[int], int], n: int) -> dict[str, Any]:
    """Run ``work(i)`` in ``n`` children forked from this process at once (multiprocessing's
    ``fork`` start method) and wait for them: their exit codes, and the ``i`` whose result did not
    come back as ``expected(i)`` (results travel through shared memory, no thread of ours)."""
    fork = multiprocessing.get_context("fork")
    out = fork.Array("q", n, lock=False)

    def child(i: int) -> None:
        out[i] = work(i)

    children = [fork.Process(target=child, args=(i,)) for i in range(n)]
    for p in children:
        p.start()
    for p in children:
        p.join(60)
    return {"codes": [p.exitcode for p in children], "wrong": [i for i in range(n) if out[i] != expected(i)]}


def children_all_right(run: subprocess.CompletedProcess[str], n: int) -> dict[str, Any]:
    """The driver's last line (JSON with ``fork_and_wait``'s answer), once it says that all ``n``
    children exited 0 with the right result; else fails naming the signals that killed them."""
    assert run.returncode == 0, run.stderr
    out: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    signals = [signal.Signals(-code).name for code in out["codes"] if code is not None and code < 0]
    assert out["codes"] == [0] * n, f"children killed by {signals}: {run.stderr[-2000:]}"
    assert out["wrong"] == []
    return out
