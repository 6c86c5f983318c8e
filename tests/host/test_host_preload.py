"""What a warm actor host imports before any actor arrives: numpy by default (the module of
almost every real actor class imports it), then the modules ``preload=`` names; a host starts
all the same where one of them is missing.

This module imports no numpy itself, so the classes below carry no reference to it: what the
actor sees in ``sys.modules`` is what its host had imported before it came.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import actorrt
from actorrt.transport.rpc import HOST_READY_PREFIX as READY_PREFIX
from tests.conftest import ProcCluster

ROOT = Path(__file__).resolve().parents[2]


@actorrt.remote_class
class FirstLook:
    """Records, when it is constructed, which heavy modules its host had already imported."""

    def __init__(self) -> None:
        self.seen = {name: name in sys.modules for name in ("numpy", "json.tool")}

    def imported(self) -> dict[str, bool]:
        return self.seen


async def test_a_warm_host_has_numpy_imported_before_any_actor_arrives(cluster: ProcCluster) -> None:
    async with cluster.connect(log_to_driver=False):
        actor = await FirstLook.remote()
        assert await actor.imported() == {"numpy": True, "json.tool": False}
        await actorrt.kill(actor)


async def test_preload_names_more_modules_next_to_numpy() -> None:
    async with actorrt.connect(num_cpus=1, preload=["json.tool"], log_to_driver=False):
        actor = await FirstLook.remote()
        assert await actor.imported() == {"numpy": True, "json.tool": True}
        await actorrt.kill(actor)


def _start_host(tmp_path: Path, preload: str) -> tuple[str, str, int]:
    """Run ``python -m actorrt.host.server`` where ``import numpy`` fails as if numpy were not
    installed; its first stdout line, its stderr, and its exit status once its stdin closes."""
    shadow = tmp_path / "shadow" / "numpy"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("No module named numpy (shadowed by the test)")\n')
    env = dict(os.environ, ACTORRT_PRELOAD=preload)
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "actorrt.host.server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        first = proc.stdout.readline()
    finally:
        proc.stdin.close()  # the host exits when its daemon's pipe closes
        code = proc.wait(30)
    return first, proc.stderr.read(), code


def test_a_host_starts_where_numpy_is_not_installed(tmp_path: Path) -> None:
    first, stderr, code = _start_host(tmp_path, "")
    assert first.startswith(READY_PREFIX), stderr
    assert "numpy" not in stderr  # a default that is not there is skipped without a word
    assert code == 70  # the exit for "its daemon went away"


def test_a_named_preload_that_fails_is_reported_and_the_host_starts(tmp_path: Path) -> None:
    first, stderr, code = _start_host(tmp_path, "no_such_module_here,json.tool")
    assert first.startswith(READY_PREFIX), stderr
    assert "actorrt: preloading 'no_such_module_here' failed: No module named 'no_such_module_here'" in stderr
    assert "numpy" not in stderr and code == 70
