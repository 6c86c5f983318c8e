"""``connect(files=...)``: folders shipped whole with their modes, symlink loops, the size
limit, and entries the host refuses outside the actor's folder."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

import actorrt
from tests.conftest import ProcCluster


def tree_of(root: str) -> dict[str, tuple[str, int, bytes]]:
    """Every entry under ``root``: relative path -> (kind, permission bits, contents)."""
    tree: dict[str, tuple[str, int, bytes]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            path = os.path.join(folder, name)
            tree[os.path.relpath(path, root)] = ("dir", os.stat(path).st_mode & 0o777, b"")
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                tree[os.path.relpath(path, root)] = ("file", os.stat(path).st_mode & 0o777, f.read())
    return tree


@actorrt.remote_class
class Inspector:
    """Looks at what landed in the actor's working folder."""

    def tree(self, root: str) -> dict[str, tuple[str, int, bytes]]:
        return tree_of(root)

    def read(self, path: str) -> str:
        with open(path) as f:
            return f.read()

    def run(self, path: str) -> str:
        return subprocess.run([path], capture_output=True, text=True, check=True).stdout


# ---- connect(files=[folder]) ships the folder -------------------------------------------------


async def test_folders_ship_recursively_with_modes_and_empty_folders(
    cluster: ProcCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    some = tmp_path / "some_dir"
    (some / "nested" / "deeper").mkdir(parents=True)
    (some / "empty").mkdir()
    (some / "top.txt").write_text("top")
    (some / ".hidden").write_text("hidden")
    (some / "nested" / "n.txt").write_text("nested")
    (some / "nested" / "deeper" / "d.bin").write_bytes(bytes(range(256)))
    (some / "nested" / "private.txt").write_text("mine")
    (some / "nested" / "private.txt").chmod(0o600)
    script = some / "run.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o755)
    os.symlink("..", some / "nested" / "up")  # a loop back to some_dir: skipped, not followed forever
    expected = tree_of(str(some))
    del expected[os.path.join("nested", "up")]  # os.walk lists the link without following it
    assert ("dir", 0o755, b"") == expected["empty"] and expected["run.sh"][1] == 0o755
    monkeypatch.chdir(tmp_path)

    for pattern in ["some_dir", "some_dir/", str(some)]:
        async with cluster.connect(files=[pattern]) as c:
            inspector = await Inspector.remote()
            assert await inspector.tree("some_dir") == expected, pattern
            assert await inspector.run("some_dir/run.sh") == "ran\n"
            await actorrt.kill(inspector)
        assert c.closed


async def test_files_over_the_size_limit_fail_naming_the_size(cluster: ProcCluster, tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(3):
        (big / f"part{i}.bin").write_bytes(b"\0" * (700 * 1024))
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"the 3 matched files add up to 2\.1 MiB, over the 1\.0 MiB"):
        async with cluster.connect(files=[str(big)], max_payload_mb=1):
            pass
    assert time.monotonic() - started < 10


async def test_the_host_refuses_shipped_entries_outside_its_folder(cluster: ProcCluster) -> None:
    """What a client sends is checked again where it is written: no entry, folder or file, lands
    outside the actor's working folder."""
    from actorrt.v1 import actor_host_pb2

    name = f"actorrt-escape-{os.getpid()}-{time.time_ns()}"
    bad = [
        actor_host_pb2.ShippedFile(path=f"../{name}", data=b"x", mode=0o644),
        actor_host_pb2.ShippedFile(path=f"../{name}", mode=stat.S_IFDIR | 0o755),
        actor_host_pb2.ShippedFile(path=f"/tmp/{name}", data=b"x", mode=0o644),
    ]
    async with cluster.connect() as c:
        for entry in bad:
            c.creator.files = [actor_host_pb2.ShippedFile(path="fine.txt", data=b"ok"), entry]
            with pytest.raises(actorrt.RemoteError, match="shipped file path must be relative and inside"):
                await Inspector.remote()
    assert not os.path.lexists(f"/tmp/{name}")


# ---- symlink loops --------------------------------------------------------------------------


async def test_files_glob_over_a_symlink_loop_ships_the_real_files(
    cluster: ProcCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("alpha")
    (data / "sub" / "b.txt").write_text("beta")
    os.symlink(".", data / "loop")  # data/loop/loop/loop/... until the kernel says ELOOP
    os.symlink("a.txt", data / "alias.txt")  # a link to a file: shipped as that file's contents
    bad = tmp_path / "bad"
    bad.mkdir()
    os.symlink(".", bad / "loop")
    os.symlink("nowhere", bad / "broken")
    monkeypatch.chdir(tmp_path)

    started = time.monotonic()
    async with cluster.connect(files=["data/**"]) as c:
        assert time.monotonic() - started < 30
        inspector = await Inspector.remote()
        assert await inspector.read("data/a.txt") == "alpha"
        assert await inspector.read("data/sub/b.txt") == "beta"
        assert await inspector.read("data/alias.txt") == "alpha"
        assert sorted(await inspector.tree("data")) == ["a.txt", "alias.txt", "sub", os.path.join("sub", "b.txt")]
        await actorrt.kill(inspector)
    assert c.closed

    with pytest.raises(FileNotFoundError) as failure:
        async with cluster.connect(files=["bad/*"]):
            pass
    message = str(failure.value)
    assert message == (
        "files=: 'bad/*' matches nothing to ship, only bad/broken (a broken symlink), bad/loop (a symlink loop)"
    )
