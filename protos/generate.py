"""Regenerate actorrt/v1/*_pb2.py, *_pb2_grpc.py and *.pyi from protos/actorrt/v1/*.proto.

Run from anywhere: `python protos/generate.py`. Generated files are committed and never edited
by hand; tests/test_protos.py fails when they are stale. `--out DIR` writes into DIR instead
(that test compares the two).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"


def generate(out_dir: Path) -> list[Path]:
    protos = sorted(PROTO_ROOT.glob("actorrt/v1/*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *map(str, protos),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted((out_dir / "actorrt" / "v1").glob("*_pb2*.py*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT, help="output root (default: the repo)")
    args = parser.parse_args()
    (args.out / "actorrt" / "v1").mkdir(parents=True, exist_ok=True)
    for path in generate(args.out):
        print(path.relative_to(args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
