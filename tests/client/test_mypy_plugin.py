"""actorrt.mypy_plugin: mypy sees what ``@remote_class`` adds to a class."""

from __future__ import annotations

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """
import actorrt

@actorrt.remote_class
class Counter:
    def add(self, n: int) -> int:
        return n

@actorrt.remote_class(max_concurrency=2)
class Other:
    pass

async def main() -> None:
    reveal_type(Counter.remote(1))
    reveal_type(Other.options(num_cpus=2))
    reveal_type(await Other.options(num_cpus=2).remote())
    Counter.missing
"""


def test_remote_and_options_are_typed_and_nothing_else_is_added(tmp_path: Path) -> None:
    (tmp_path / "snippet.py").write_text(SNIPPET)
    (tmp_path / "mypy.ini").write_text(
        f"[mypy]\nplugins = {ROOT / 'actorrt' / 'mypy_plugin.py'}\nfollow_imports = silent\n"
        f"mypy_path = {ROOT}\ncache_dir = {tmp_path / 'cache'}\n"
    )
    out, err, _ = api.run(["--config-file", str(tmp_path / "mypy.ini"), str(tmp_path / "snippet.py")])
    assert not err, err
    lines = [line.split(": ", 1)[1] for line in out.splitlines() if "snippet.py:" in line]
    assert lines == [
        'note: Revealed type is "actorrt.client.future.CallFuture[actorrt.client.handle.ActorHandle[snippet.Counter]]"',
        'note: Revealed type is "actorrt.client.remote._Factory[snippet.Other]"',
        'note: Revealed type is "actorrt.client.handle.ActorHandle[snippet.Other]"',
        'error: "type[Counter]" has no attribute "missing"  [attr-defined]',
    ], out
