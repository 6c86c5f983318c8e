#!/usr/bin/env bash
# One entry point for the project; each command sets up what it needs first.
#   ./dev.sh demo            the main job: IMPALA on CartPole with remote collectors (embedded cluster)
#   ./dev.sh test [ARGS]     lint, then the test suite on 2 workers (what CI runs); ARGS go to pytest
#   ./dev.sh lint            ruff check, ruff format --check and mypy over the project
#   ./dev.sh bench [ARGS]    bench/actor_calls.py
#   ./dev.sh setup           only create .venv and install (torch 2.13.0 first)
set -euo pipefail
cd "$(dirname "$0")"

VENV=.venv
PY=$VENV/bin/python

pip_install() {
    "$PY" -m pip install -q "$@" >"$VENV/pip.log" 2>&1 || {
        grep -v '^WARNING: Location' "$VENV/pip.log" >&2
        echo "pip install $* failed" >&2
        exit 1
    }
}

setup() {
    if [ ! -x "$PY" ]; then
        python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
            || { echo "actorrt needs Python 3.11 or newer (python3 is $(python3 --version))" >&2; exit 1; }
        python3 -m venv "$VENV"
    fi
    local stamp="$VENV/.installed-$(cat pyproject.toml | sha1sum | cut -c1-12)"
    if [ ! -f "$stamp" ]; then
        echo "setting up $VENV (first run only)..." >&2
        # torch first: anything that depends on torch then finds it satisfied. (A CPU build where
        # pip's index has one; see the README for PyTorch's CPU index.)
        pip_install torch==2.13.0
        pip_install -e '.[dev,rl,atari]'
        # MuJoCo (CPU wheels, a few seconds) is optional: its examples and tests skip without it.
        "$PY" -m pip install -q -e '.[mujoco]' >"$VENV/pip-mujoco.log" 2>&1 \
            || echo "note: the mujoco extra did not install (see $VENV/pip-mujoco.log); MuJoCo tests will skip" >&2
        "$PY" -c 'import actorrt, rl, torch' || { echo "setup failed" >&2; exit 1; }
        rm -f "$VENV"/.installed-*
        touch "$stamp"
    fi
}

cmd=${1:-help}
[ $# -gt 0 ] && shift
case "$cmd" in
    setup) setup ;;
    demo)
        setup
        exec "$PY" examples/impala_cartpole.py "$@"
        ;;
    test)
        setup
        "$0" lint  # style and types first: CI fails on either, as on a failing test
        # Two pytest-xdist workers, each taking a whole test file at a time (a module's cluster
        # fixture starts once), in collection order (tests/conftest.py puts the longest first):
        # the runtime's tests mostly wait on processes and sockets, the rl tests mostly compute,
        # so the two overlap. PYTEST_WORKERS=0 runs in this one process.
        exec "$PY" -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
        ;;
    lint)
        setup
        rc=0
        "$VENV/bin/ruff" check . || rc=1
        "$VENV/bin/ruff" format --check . || rc=1
        "$VENV/bin/mypy" || rc=1
        exit $rc
        ;;
    bench)
        setup
        exec "$PY" bench/actor_calls.py "$@"
        ;;
    *)
        sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
        [ "$cmd" = help ] || exit 2
        ;;
esac
