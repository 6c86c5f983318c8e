"""``python -m actorrt`` and the ``actorrt`` console script."""

from __future__ import annotations

import sys

import actorrt  # noqa: F401 - sets gRPC's environment before grpc is imported
from actorrt.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
