"""An actor that ends itself (``sys.exit`` in a method): the exit code, and a message of any size,
reach its callers as the cause."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import actorrt
from tests.conftest import ProcCluster

pytestmark = pytest.mark.timeout(120)

_EXITING_SCRIPT = """
import sys, actorrt
@actorrt.remote_class
class Quitter:
    def ok(self): return 1
    def quit(self, code): sys.exit(code)
    async def aquit(self): sys.exit()
with actorrt.connect(num_cpus=1) as c:
    a = Quitter.remote().result()
    first, quitting, after = a.ok(), a.quit(3), a.ok()
    print("first", first.result())
    for f in (quitting, after):
        try:
            f.result()
        except actorrt.ActorDiedError as e:
            print("died:", e.cause)
    b = Quitter.remote().result()
    try:
        b.aquit().result()
    except actorrt.ActorDiedError as e:
        print("died:", e.cause)
    print("free", c.status().result().slots_free)
"""


def test_sys_exit_in_a_method_ends_the_actor_with_its_exit_code_as_the_cause(tmp_path: Path) -> None:
    """The call made before is answered; the exiting call and the one after fail with
    ActorDiedError naming the method and the exit code; the driver prints no asyncio noise."""
    import sys

    script = tmp_path / "quit.py"
    script.write_text(_EXITING_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "first 1"
    assert lines[1] == lines[2] == "died: Quitter.quit called sys.exit(3): the actor exited with code 3"
    assert lines[3] == "died: Quitter.aquit called sys.exit(None): the actor exited with code 0"
    assert lines[4] == "free 1"
    assert "never retrieved" not in out.stderr and "Traceback" not in out.stderr, out.stderr


@actorrt.remote_class
class Quitter:
    def quit_saying(self, n: int) -> None:
        sys.exit("why " * n)


async def test_a_huge_sys_exit_message_keeps_the_exit_cause(one_worker: ProcCluster) -> None:
    """The cause of a ``sys.exit(<message>)`` travels to the daemon as one line of a pipe read
    64 KiB at most: a longer message broke that reader and the cause became "exited with code 1"."""
    async with one_worker.connect(log_to_driver=False):
        q = await Quitter.remote()
        with pytest.raises(
            actorrt.ActorDiedError,
            match=r"Quitter.quit_saying called sys.exit\('why why .*\.\.\. \(80002 characters\)\): the actor exited with code 1",
        ):
            await q.quit_saying(20_000)
