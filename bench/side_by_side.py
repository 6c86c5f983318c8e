"""Run systems side by side: one child process per system per round, alternating (A B A B).

``run_rounds`` runs ``actor_calls.py --_system-child NAME`` with each system's interpreter and
collects the JSON lines the children print; ``summary_table`` prints the median over rounds of
each number, side by side, with our value divided by each peer's.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import IO, Any

OURS = "actorrt"
CHILD_TIMEOUT_S = 900


@dataclass
class Unavailable:
    system: str
    reason: str


def run_rounds(
    script: str,
    systems: list[str],
    pythons: dict[str, str],
    child_args: list[str],
    rounds: int,
    out: IO[str] | None,
) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], list[str]]:
    """(bench, system) -> the child results of every round, and the failures as lines."""
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    failures: list[str] = []
    for r in range(rounds):
        for name in systems:
            cmd = [pythons[name], script, "--_system-child", name, *child_args]
            start = time.perf_counter()
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
                stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
            except subprocess.TimeoutExpired as e:
                stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                stderr, code = f"timed out after {CHILD_TIMEOUT_S}s", -1
            for line in stdout.splitlines():
                if not line.startswith("{"):
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                row["round"] = r
                results.setdefault((row["bench"], row["system"]), []).append(row)
                text = json.dumps(row)
                print(text, flush=True)
                if out is not None:
                    out.write(text + "\n")
                    out.flush()
            if code != 0:
                tail = " | ".join(stderr.strip().splitlines()[-5:])
                failures.append(f"round {r} {name}: exit {code}: {tail[-800:]}")
            print(
                f"[round {r + 1}/{rounds}] {name}: {time.perf_counter() - start:.1f} s, exit {code}",
                file=sys.stderr,
                flush=True,
            )
    return results, failures


def _median(rows: list[dict[str, Any]]) -> float | None:
    values = [row["value"] for row in rows if row.get("value") is not None]
    return statistics.median(values) if values else None


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def summary_table(
    results: dict[tuple[str, str], list[dict[str, Any]]], systems: list[str], unavailable: list[Unavailable]
) -> str:
    benches: list[tuple[str, str]] = []
    for bench, _ in results:
        unit = results[(bench, _)][0].get("unit", "")
        if (bench, unit) not in benches:
            benches.append((bench, unit))
    peers = [s for s in systems if s != OURS]
    header = ["bench", "unit", *systems, *(f"{OURS}/{p}" for p in peers)]
    header += [u.system for u in unavailable]
    rows = [header]
    for bench, unit in benches:
        med = {s: _median(results.get((bench, s), [])) for s in systems}
        ratios = []
        for p in peers:
            ours, theirs = med.get(OURS), med.get(p)
            ratios.append(_fmt(ours / theirs) if ours is not None and theirs else "-")
        rows.append([bench, unit, *(_fmt(med[s]) for s in systems), *ratios, *("n/a" for _ in unavailable)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    for u in unavailable:
        lines.append(f"{u.system}: {u.reason}")
    rounds = max((len(v) for v in results.values()), default=0)
    lines.append(
        f"values: median over {rounds} round(s) of each child's median; "
        f"{OURS}/peer < 1 is better for s/us/MB/%, > 1 for calls/s, MiB/s, x"
    )
    return "\n".join(lines)
