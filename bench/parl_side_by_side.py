"""PARL's benchmark scripts side by side: on PARL's own code, and on this project's.

For QuickStart, ES and A2C (PARL's ``benchmark/torch`` folders, from a PARL checkout:
``--parl-src``, default ``$PARL_SRC`` or ``/work/parl-src``), two ways:

- ``parl``: PARL's own package (its ``parl/``: Model, Algorithm, Agent, algorithms, utils, env)
  with its remote layer (xparl: pyzmq and grpcio 1.37, which do not install on Python 3.11)
  swapped for ``actorrt.compat.parl``'s, and ``gym`` mapped onto gymnasium as the runner maps
  it (``--launch-parl``);
- ``ours``: ``python -m actorrt.compat.parl train.py``, the script on ``actorrt.compat.parl``.

The scripts run unchanged; the config files of ES and A2C get the cluster's address and the
sizes given here. The remote scripts get a cluster of their own (``actorrt start --cpus
ACTORS`` in a temporary home), so both ways use the same remote layer and the same machine:
what differs is PARL's training code against this project's. Each run prints one JSON line::

    {"bench": "parl_side_by_side", "script": "es", "way": "ours", "command": [...], "wall_s": 81.2,
     "value": 5123.4, "unit": "env steps/s", "points": [...], ...}

- ``quickstart``: the test reward PARL's script logs after its 1,000 episodes (``Test reward:
  X``, the last of the ten it logs, every 100 episodes; all ten are in ``points``);
- ``es``: environment steps a second, from the script's own metrics lines
  (``sample_total_steps`` against the time each line arrived, first to last);
- ``a2c``: the same from A2C's metrics lines (``Sample steps``).

    python bench/parl_side_by_side.py --list                  # the commands, one JSON line each
    python bench/parl_side_by_side.py quickstart es a2c       # run each both ways, in turn
    python bench/parl_side_by_side.py es --way ours --actors 4 --es-train-steps 20

Not for CI: these are long runs, to be timed on an idle machine (nice nothing else). The
``parl`` way needs PARL's own dependencies: ``pip install -e '.[parl-bench]'`` (termcolor, six,
scipy, tensorboardX). Both ways need ``parl.Model``/``Algorithm``/``Agent`` and
``parl.algorithms`` (PolicyGradient, A2C) in ``actorrt.compat.parl`` for ``ours``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"quickstart": "QuickStart", "es": "ES", "a2c": "a2c"}
WAYS = ("parl", "ours")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scripts", nargs="*", choices=[*SCRIPTS, []], help="which (default: all three)")
    p.add_argument("--way", choices=[*WAYS, "both"], default="both")
    p.add_argument("--list", action="store_true", help="print the commands, run nothing")
    p.add_argument("--parl-src", default=os.environ.get("PARL_SRC", "/work/parl-src"), help="a PARL checkout")
    p.add_argument("--actors", type=int, default=4, help="ES and A2C remote actors (and the cluster's CPU slots)")
    p.add_argument("--es-env", default="Humanoid-v4", help="ES env_name (PARL's config: Humanoid-v4)")
    p.add_argument("--es-train-steps", type=int, default=20, help="ES train_steps (PARL's config: 200)")
    p.add_argument("--es-noise-size", type=int, default=200_000_000, help="ES noise table (PARL's: 2e8 floats)")
    p.add_argument("--a2c-env-num", type=int, default=5, help="A2C envs per actor (PARL's: 5)")
    p.add_argument("--a2c-sample-steps", type=int, default=200_000, help="A2C max_sample_steps (PARL's: 1e7)")
    p.add_argument("--timeout", type=float, default=4 * 3600, help="seconds one run may take")
    p.add_argument("--out", help="also append the JSON lines to this file")
    return p.parse_args(argv)


# ---- the parl way: PARL's package, this project's remote layer --------------------------------


def launch_parl(parl_src: str, argv: list[str]) -> int:
    """Run ``argv`` (SCRIPT.py ARGS) as the runner does, but with ``import parl`` PARL's own
    package from ``parl_src`` and ``parl.remote`` this project's remote layer."""
    import actorrt.compat.parl as compat
    from actorrt.compat.parl import _hooks, _runner

    _hooks.install(parl=False)  # gym onto gymnasium, numpy 1's removed ways; parl left to PARL
    remote = types.ModuleType("parl.remote")
    vars(remote).update({name: getattr(compat, name) for name in compat.__all__})
    vars(remote).update({name: getattr(compat.exceptions, name) for name in compat.exceptions.__all__})
    sys.modules["parl.remote"] = remote
    sys.modules["parl.remote.exceptions"] = compat.exceptions
    sys.path.insert(1, parl_src)  # [0] becomes the script's folder
    return _runner.main(argv)


# ---- one run ---------------------------------------------------------------------------------


def command(way: str, parl_src: str) -> list[str]:
    if way == "ours":
        return [sys.executable, "-m", "actorrt.compat.parl", "train.py"]
    return [sys.executable, str(Path(__file__).resolve()), "--launch-parl", parl_src, "train.py"]


def config_values(script: str, args: argparse.Namespace, address: str) -> tuple[str, dict[str, str]]:
    """The config file of a remote script and the values it gets (Python source)."""
    if script == "es":
        return "es_config.py", {
            "master_address": repr(address),
            "env_name": repr(args.es_env),
            "actor_num": str(args.actors),
            "train_steps": str(args.es_train_steps),
            "noise_size": str(args.es_noise_size),
        }
    return "a2c_config.py", {
        "master_address": repr(address),
        "actor_num": str(args.actors),
        "env_num": str(args.a2c_env_num),
        "max_sample_steps": str(args.a2c_sample_steps),
    }


def set_config(path: Path, values: dict[str, str]) -> None:
    text = path.read_text()
    for key, value in values.items():
        text, n = re.subn(rf"'{key}':[^\n]*,", f"'{key}': {value},", text)
        if n != 1:
            raise SystemExit(f"{path}: no '{key}' to set")
    path.write_text(text)


def metrics(line: str) -> dict[str, Any] | None:
    """A metrics dict a script logged (``[time ...] {...}``), numpy's reprs read as numbers."""
    if "] {" not in line:
        return None
    text = ANSI.sub("", line).split("] ", 1)[1]
    text = re.sub(r"np\.\w+\(([^)]*)\)", r"\1", text).replace("'", '"').replace("None", "null")
    try:
        out: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError:
        return None
    return out


def measure(script: str, lines: list[tuple[float, str]]) -> dict[str, Any]:
    """The run's result from its output lines (arrival time, text)."""
    if script == "quickstart":
        rewards = [float(m.group(1)) for _, line in lines if (m := re.search(r"Test reward: ([-\d.e]+)", line))]
        return {"value": rewards[-1] if rewards else None, "unit": "test reward", "points": rewards}
    key = "sample_total_steps" if script == "es" else "Sample steps"
    points = [(t, logged[key]) for t, line in lines if (logged := metrics(line)) is not None and key in logged]
    if len(points) < 2:
        return {"value": None, "unit": "env steps/s", "points": points, "error": "fewer than 2 metrics lines"}
    (t0, s0), (t1, s1) = points[0], points[-1]
    return {"value": (s1 - s0) / (t1 - t0), "unit": "env steps/s", "points": points}


def start_cluster(home: Path, cpus: int) -> tuple[str, dict[str, str]]:
    from tests.conftest import free_port  # the project's own helper

    port = free_port()
    env = dict(os.environ, ACTORRT_HOME=str(home))
    env.pop("ACTORRT_TOKEN", None)
    started = subprocess.run(
        [sys.executable, "-m", "actorrt", "start", "--port", str(port), "--cpus", str(cpus)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if started.returncode != 0:
        raise SystemExit(f"actorrt start failed: {started.stderr}")
    return f"127.0.0.1:{port}", env


def run_one(script: str, way: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"parl-{script}-{way}-") as tmp:
        folder = Path(tmp) / SCRIPTS[script]
        shutil.copytree(Path(args.parl_src) / "benchmark" / "torch" / SCRIPTS[script], folder)
        env = dict(os.environ)
        address = None
        if script != "quickstart":
            address, env = start_cluster(Path(tmp) / "home", args.actors)
            name, values = config_values(script, args, address)
            set_config(folder / name, values)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        cmd = command(way, args.parl_src)
        lines: list[tuple[float, str]] = []
        start = time.monotonic()
        try:
            with subprocess.Popen(
                cmd, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            ) as proc:
                assert proc.stdout is not None
                for line in proc.stdout:
                    lines.append((time.monotonic() - start, line.rstrip("\n")))
                    if time.monotonic() - start > args.timeout:
                        proc.kill()
                status = proc.wait()
        finally:
            if address is not None:
                subprocess.run([sys.executable, "-m", "actorrt", "stop"], env=env, capture_output=True)  # its home's
        out = {
            "bench": "parl_side_by_side",
            "script": script,
            "way": way,
            "command": cmd,
            "status": status,
            "wall_s": round(time.monotonic() - start, 2),
            "actors": args.actors if script != "quickstart" else None,
            **measure(script, lines),
        }
        if status != 0:
            out["error"] = "\n".join(line for _, line in lines[-20:])
        return out


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    if raw[:1] == ["--launch-parl"]:
        return launch_parl(raw[1], raw[2:])
    args = parse_args(raw)
    scripts = args.scripts or list(SCRIPTS)
    ways = WAYS if args.way == "both" else (args.way,)
    failed = False
    for script in scripts:
        for way in ways:
            if args.list:
                record: dict[str, Any] = {
                    "script": script,
                    "way": way,
                    "folder": str(Path(args.parl_src) / "benchmark" / "torch" / SCRIPTS[script]),
                    "command": command(way, args.parl_src),
                }
                if script != "quickstart":
                    file, values = config_values(script, args, "<cluster>")
                    record["config"] = {"file": file, "values": values}
                    record["cluster"] = f"actorrt start --cpus {args.actors}"
            else:
                record = run_one(script, way, args)
                failed |= record.get("value") is None
            line = json.dumps(record)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(line + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
