"""Regenerate docs/dashboard.png: the status page of a small live cluster, in headless chromium.

Run from anywhere: `python docs/dashboard_screenshot.py` (needs Debian's chromium). It starts
a master with `--dashboard-port` and two worker daemons (state in a temporary ACTORRT_HOME),
creates a few actors, ends three of them in three different ways so the page has deaths with
causes, keeps two collectors busy (CPU %, calls/s, the history line) for `--history-s`, clicks
one of them so the page shows its last lines, takes the screenshot (driving chromium over its
DevTools protocol, `tests/cdp.py`), and stops every process it started by its PID.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import actorrt

ROOT = Path(__file__).resolve().parent.parent


@actorrt.remote_class
class Collector:
    def __init__(self) -> None:
        self.steps = 0

    def step(self) -> int:
        started = time.perf_counter()
        while time.perf_counter() - started < 0.004:  # an environment step's CPU
            pass
        self.steps += 1
        if self.steps % 50 == 0:
            print(f"episode {self.steps // 50}: return {np.random.normal(200, 20):.1f} over 50 steps", flush=True)
        return 1


@actorrt.remote_class
class ReplayBuffer:
    def __init__(self, mb: int) -> None:
        self.data = np.ones(mb * 2**20, dtype=np.uint8)

    def pid(self) -> int:
        return os.getpid()


@actorrt.remote_class(max_memory_mb=200)
class Leaky:
    def grow(self, mb: int) -> None:
        self.blob = np.ones(mb * 2**20, dtype=np.uint8)


@actorrt.remote_class
class Quitter:
    def finish(self) -> None:
        sys.exit(3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1200)
    parser.add_argument("--history-s", type=float, default=65, help="how long the collectors run first")
    args = parser.parse_args()
    if shutil.which("chromium") is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium)")
    sys.path.insert(0, str(ROOT))  # tests/cdp.py drives it: the repository's root, wherever this runs from
    from tests.cdp import Chromium

    home = Path(tempfile.mkdtemp(prefix="actorrt-screenshot-"))
    env = dict(os.environ, ACTORRT_HOME=str(home), PYTHONPATH=str(ROOT))
    env.pop("ACTORRT_TOKEN", None)
    port, dash = _free_port(), _free_port()
    address = f"127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(*argv: str) -> None:
        procs.append(subprocess.Popen([sys.executable, "-m", "actorrt", *argv, "--block"], env=env))
        records = home / "processes"  # the daemon's record, <pid>@<pid namespace>.json, once it serves
        deadline = time.monotonic() + 30
        while not any(records.glob(f"{procs[-1].pid}@*.json")):
            if procs[-1].poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"actorrt {argv[0]} did not start")
            time.sleep(0.05)

    try:
        spawn("start", "--port", str(port), "--cpus", "0", "--dashboard-port", str(dash))
        token = (home / "token").read_text().strip()
        env["ACTORRT_TOKEN"] = token
        for _ in range(2):
            spawn("connect", "--address", address, "--cpus", "3")
        with actorrt.connect(address, token=token, log_to_driver=False):
            collectors = [Collector.remote().result() for _ in range(2)]
            buffer = ReplayBuffer.options(name="replay", max_restarts=3).remote(150).result()
            leaky, quitter, gone = Leaky.remote().result(), Quitter.remote().result(), Collector.remote().result()
            actorrt.kill(gone).result()
            os.kill(buffer.pid().result(), signal.SIGKILL)  # it restarts: the page counts it
            for call in (lambda: leaky.grow(400), quitter.finish):
                try:
                    call().result(30)
                except actorrt.ActorDiedError:
                    pass  # what it is for: the page lists the death and its cause
            stop = threading.Event()

            def collect(collector: actorrt.ActorHandle) -> None:
                while not stop.wait(0.015):  # a fifth of a core each
                    collector.step().result()

            threads = [threading.Thread(target=collect, args=(c,), daemon=True) for c in collectors]
            for thread in threads:
                thread.start()
            time.sleep(args.history_s)  # the history line: one point per 10 s
            with Chromium(home / "chromium") as browser:
                page = browser.page()
                page.navigate(f"http://127.0.0.1:{dash}/")
                row = f"#actors tr[data-actor-id='{collectors[0].actor_id}']"
                page.wait_for(f'!!document.querySelector("{row}")')
                page.evaluate(f'document.querySelector("{row}").click()')
                page.wait_for("document.getElementById('log-text').textContent.includes('episode')")
                page.screenshot(args.out, args.width, args.height)
            stop.set()
            for thread in threads:
                thread.join(30)
            print(f"wrote {args.out} ({len(collectors) + 1} live actors, 3 deaths)", file=sys.stderr)
            for collector in collectors:
                actorrt.kill(collector).result()
            actorrt.kill(buffer).result()
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
