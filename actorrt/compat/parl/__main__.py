"""``python -m actorrt.compat.parl SCRIPT.py [ARGS...]``: run a PARL script unchanged (``_runner``)."""

from __future__ import annotations

import sys

from actorrt.compat.parl._runner import main

if __name__ == "__main__":
    sys.exit(main())
