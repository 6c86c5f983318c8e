"""The worker daemon's pool of warm actor hosts, as a plain state object.

One ``Host`` per CPU the daemon offers; its index is what the wire calls a slot
(``SlotReady.slot``, ``StartActor.slot``, ``ActorExited.slot``). Each host goes::

    STARTING --spawned(pid), ready(endpoint)--> READY --assign(StartActor)--> BUSY
      ^   '-- start_failed: back off, try again   |                            |  stop(actor_id, reason)
      |                                           | exited: SlotLost           |  memory_used(over the limit)
      |                                           v                            v
      '------ restart (unless closing) ------- EXITED <------- exited ----- STOPPING
                                   reported(): its actor's exit,      (BUSY -> EXITED too: an actor
                                   after the actor's last output       that ended by itself)

Synchronous with no I/O: the daemon's ``HostRunner`` spawns and reaps the processes and turns
what each transition returns (``Effects``: events for the master, signals for processes) into
I/O. ``validate()`` checks the invariants; with ``validate_each`` it runs after every transition,
and a violation (or a transition asked of a host in the wrong state) raises ``PoolStateError``,
logged as an error and kept in ``violation``. Not thread-safe: the daemon calls it from its
event loop only (the metrics thread only reads hosts' fields).
"""

from __future__ import annotations

import enum
import functools
import logging
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from actorrt.common.errors import SLOT_NOT_READY
from actorrt.v1 import master_pb2 as pb

__all__ = [
    "STOP_GRACE_S",
    "Effects",
    "ExitReport",
    "Host",
    "HostPool",
    "HostState",
    "PoolStateError",
    "Signal",
    "describe_exit",
]

log = logging.getLogger("actorrt.worker")
STOP_GRACE_S = 2.0  # from SIGTERM to SIGKILL when an actor is stopped


def describe_exit(returncode: int) -> str:
    if returncode == 0:
        return "its owner closed it"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-returncode} ({name})"
    return f"its process exited with code {returncode}"


class HostState(enum.Enum):
    STARTING = "starting"  # no process yet, or one that has not said it is ready
    READY = "ready"  # warm: serving at ``endpoint``, no actor; the master may place here
    BUSY = "busy"  # hosting ``actor``
    STOPPING = "stopping"  # hosting ``actor``, which is being ended for ``stop_cause``
    EXITED = "exited"  # its process is gone; ``actor`` (if any) until its exit is reported


class PoolStateError(AssertionError):
    """The pool's fields contradict its states: a bug in the daemon, never a user error."""


@dataclass(frozen=True)
class Signal:
    """Send ``signum`` to ``pid`` after ``delay_s``. ``host`` set: that host's process, sent
    only while it is still running as ``pid`` (a pid can be reused); None: one process of an
    actor's tree, sent as is."""

    pid: int
    signum: int
    delay_s: float = 0.0
    host: int | None = None


@dataclass
class Effects:
    """What the daemon must do after a transition."""

    events: list[pb.WorkerEvent] = field(default_factory=list)  # to the master, in order
    signals: list[Signal] = field(default_factory=list)
    refused: str = ""  # why the command was refused; "" when it was accepted


@dataclass(frozen=True)
class ExitReport:
    """An actor's exit, reported once its host's output is drained."""

    actor: pb.StartActor
    index: int
    cause: str
    exit_code: int

    def event(self) -> pb.WorkerEvent:
        return pb.WorkerEvent(
            actor_exited=pb.ActorExited(
                actor_id=self.actor.actor_id, slot=self.index, cause=self.cause, exit_code=self.exit_code
            )
        )


@dataclass
class Host:
    """One warm actor host of the pool (the process itself belongs to the daemon)."""

    index: int
    state: HostState = HostState.STARTING
    pid: int = 0  # its process, from spawned() until its exit is reported
    endpoint: str = ""  # where it serves, while READY, BUSY or STOPPING
    workdir: str = ""
    actor: pb.StartActor | None = None
    stop_cause: str = ""
    returncode: int | None = None  # once EXITED, until restarted
    failures: int = 0  # failed starts in a row

    @property
    def started(self) -> bool:
        """Its process came up: it is warm or hosting an actor."""
        return self.state in (HostState.READY, HostState.BUSY, HostState.STOPPING)

    @property
    def serving(self) -> bool:
        return self.state in (HostState.BUSY, HostState.STOPPING)


_F = TypeVar("_F", bound=Callable[..., object])


def _transition(method: _F) -> _F:
    """Run ``validate()`` after ``method`` when the pool checks each transition; log and keep
    the first violation (or transition asked of a host in the wrong state) before raising it."""

    @functools.wraps(method)
    def checked(self: HostPool, *args: object, **kwargs: object) -> object:
        try:
            result = method(self, *args, **kwargs)
            if self.validate_each:
                self.validate()
        except PoolStateError as e:
            log.error("host pool: %s (in %s)", e, method.__name__)
            self.violation = self.violation or e
            raise
        return result

    return checked  # type: ignore[return-value]


class HostPool:
    """``size`` actor hosts and the transitions between their states."""

    def __init__(self, size: int, *, validate_each: bool = False) -> None:
        if size < 1:
            raise ValueError(f"a host pool needs at least 1 host, got {size}")
        self.hosts = [Host(i) for i in range(size)]
        self.validate_each = validate_each
        self.closing = False
        self.violation: PoolStateError | None = None

    def __len__(self) -> int:
        return len(self.hosts)

    # ---- starting a host --------------------------------------------------------------------

    @_transition
    def spawned(self, index: int, pid: int, workdir: str) -> None:
        """Its process exists (it has not said it is ready)."""
        host = self._expect(index, HostState.STARTING)
        if host.pid:
            raise PoolStateError(f"host {index} spawned twice (pid {host.pid}, then {pid})")
        host.pid, host.workdir = pid, workdir

    @_transition
    def ready(self, index: int, endpoint: str) -> Effects:
        """Its process said it serves at ``endpoint``: the master may place an actor here."""
        host = self._expect(index, HostState.STARTING)
        if not host.pid:
            raise PoolStateError(f"host {index} ready before it was spawned")
        host.state, host.endpoint, host.failures = HostState.READY, endpoint, 0
        return Effects(events=[self._slot_ready(host)])

    @_transition
    def start_failed(self, index: int) -> float:
        """Starting it failed (its process, if any, is gone): seconds to wait before the next try."""
        host = self._expect(index, HostState.STARTING)
        host.pid, host.workdir = 0, ""
        host.failures += 1
        return min(5.0, 0.2 * 2.0**host.failures)

    @_transition
    def restart(self, index: int) -> bool:
        """A fresh host replaces the one that exited, unless the pool is closing."""
        host = self._expect(index, HostState.EXITED)
        if host.actor is not None or host.pid:
            raise PoolStateError(f"host {index} restarted before its exit was reported")
        if self.closing:
            return False
        host.state, host.returncode = HostState.STARTING, None
        return True

    # ---- commands from the master -----------------------------------------------------------

    @_transition
    def assign(self, cmd: pb.StartActor) -> Effects:
        """Host ``cmd``'s actor on host ``cmd.slot``. Refused unless that host is READY (it may
        have exited meanwhile): the master then hears the actor exited with ``SLOT_NOT_READY``
        and its client places it again. An actor already hosted here is refused silently."""
        if any(h.actor is not None and h.actor.actor_id == cmd.actor_id for h in self.hosts):
            return Effects(refused=f"actor {cmd.actor_id} is already hosted here")
        host = self.hosts[cmd.slot] if cmd.slot < len(self.hosts) else None
        if host is None or host.state is not HostState.READY:
            event = pb.WorkerEvent(
                actor_exited=pb.ActorExited(actor_id=cmd.actor_id, slot=cmd.slot, cause=SLOT_NOT_READY, exit_code=-1)
            )
            state = "no such host" if host is None else f"host {cmd.slot} is {host.state.value}"
            return Effects(events=[event], refused=state)
        host.state, host.actor = HostState.BUSY, cmd
        return Effects()

    @_transition
    def stop(self, actor_id: str, reason: str) -> Effects:
        """End an actor: SIGTERM now, SIGKILL after ``STOP_GRACE_S``. Asked again, it signals
        again and keeps the first cause."""
        host = self.host_of(actor_id)
        if host is None or not host.serving:
            return Effects(refused=f"actor {actor_id} is not running here")
        host.state = HostState.STOPPING
        host.stop_cause = host.stop_cause or f"stopped: {reason or 'asked by the master'}"
        return Effects(
            signals=[
                Signal(host.pid, signal.SIGTERM, host=host.index),
                Signal(host.pid, signal.SIGKILL, STOP_GRACE_S, host=host.index),
            ]
        )

    # ---- what the daemon observes -----------------------------------------------------------

    def limits_set(self) -> bool:
        """Whether an actor being served has a memory limit (then memory is measured often)."""
        return any(h.actor is not None and h.actor.resources.max_memory_mb for h in self.serving())

    @_transition
    def memory_used(self, index: int, used_bytes: int, pids: tuple[int, ...]) -> Effects:
        """The actor on host ``index`` uses ``used_bytes`` over its processes ``pids``. Over its
        ``max_memory_mb`` it is stopping, and every one of those processes is killed (a child
        may have left the host's process group). Once stopping, nothing more."""
        host = self.hosts[index]
        actor = host.actor
        limit_mb = actor.resources.max_memory_mb if actor is not None else 0
        if host.state is not HostState.BUSY or not limit_mb or used_bytes <= limit_mb * 2**20:
            return Effects()
        host.state = HostState.STOPPING
        host.stop_cause = (
            f"memory limit exceeded: {used_bytes / 2**20:.0f} MB used, max_memory_mb={limit_mb} "
            f"(over the actor's {len(pids)} processes)"
        )
        return Effects(signals=[Signal(pid, signal.SIGKILL) for pid in pids])

    @_transition
    def exited(self, index: int, returncode: int) -> Effects:
        """Its process ended. A warm one's exit is told at once (``SlotLost``): the master must
        not place there. An actor's exit waits for ``reported``, after its last output."""
        host = self.hosts[index]
        if host.state not in (HostState.READY, HostState.BUSY, HostState.STOPPING):
            raise PoolStateError(f"host {index} exited while {host.state.value}")
        was_ready = host.state is HostState.READY
        host.state, host.returncode, host.endpoint = HostState.EXITED, returncode, ""
        if not was_ready:
            return Effects()
        return Effects(events=[pb.WorkerEvent(slot_lost=pb.SlotLost(slot=index, cause=describe_exit(returncode)))])

    @_transition
    def reported(self, index: int, own_cause: str = "") -> ExitReport | None:
        """Its process is cleaned up and its output drained: the exit of its actor, if it had
        one, to tell the master. ``own_cause``: what the actor said when it ended itself. Why
        the daemon stopped it wins over that, which wins over the exit status."""
        host = self._expect(index, HostState.EXITED)
        assert host.returncode is not None
        actor, returncode = host.actor, host.returncode
        cause = host.stop_cause or own_cause or describe_exit(returncode)
        host.actor, host.stop_cause, host.pid, host.workdir = None, "", 0, ""
        return ExitReport(actor, index, cause, returncode) if actor is not None else None

    def close(self) -> None:
        """No host is started again. Not checked: the daemon must be able to stop its hosts
        whatever state a bug left the pool in."""
        self.closing = True

    # ---- reading ----------------------------------------------------------------------------

    def host_of(self, actor_id: str) -> Host | None:
        return next((h for h in self.hosts if h.actor is not None and h.actor.actor_id == actor_id), None)

    def serving(self) -> Iterator[Host]:
        """Hosts with a live actor (BUSY or STOPPING)."""
        return (h for h in self.hosts if h.serving)

    def ready_events(self) -> list[pb.WorkerEvent]:
        """``SlotReady`` for every warm host: what a master we (re)joined must learn."""
        return [self._slot_ready(h) for h in self.hosts if h.state is HostState.READY]

    def counts(self) -> dict[HostState, int]:
        counts = dict.fromkeys(HostState, 0)
        for host in self.hosts:
            counts[host.state] += 1
        return counts

    def started(self) -> int:
        """Hosts that came up: warm, or already hosting an actor."""
        return sum(h.started for h in self.hosts)

    # ---- invariants -------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise ``PoolStateError`` if the fields contradict the states."""

        def check(ok: bool, what: str) -> None:
            if not ok:
                raise PoolStateError(what)

        actors: dict[str, int] = {}
        pids: dict[int, int] = {}
        for i, h in enumerate(self.hosts):
            name = f"host {i} ({h.state.value})"
            check(h.index == i, f"{name} has index {h.index}")
            check(h.failures >= 0, f"{name} has {h.failures} failures")
            check(h.state is HostState.STARTING or h.failures == 0, f"{name} keeps {h.failures} failures")
            check((h.returncode is not None) == (h.state is HostState.EXITED), f"{name} has returncode {h.returncode}")
            check(bool(h.endpoint) == h.started, f"{name} has endpoint {h.endpoint!r}")
            stopped = h.state is HostState.STOPPING or (h.state is HostState.EXITED and h.actor is not None)
            check(bool(h.stop_cause) <= stopped, f"{name} has stop cause {h.stop_cause!r}")
            check(bool(h.stop_cause) or h.state is not HostState.STOPPING, f"{name} has no stop cause")
            if h.state in (HostState.READY, HostState.BUSY, HostState.STOPPING):
                check(h.pid > 0, f"{name} has no process")
            if h.state in (HostState.STARTING, HostState.READY):
                check(h.actor is None, f"{name} hosts an actor")
            if h.serving:
                check(h.actor is not None, f"{name} hosts no actor")
            if h.state is HostState.EXITED and h.actor is not None:
                check(h.pid > 0, f"{name} lost the process of its actor")
            if h.actor is not None:
                check(h.actor.slot == i, f"{name} hosts actor {h.actor.actor_id} placed on slot {h.actor.slot}")
                check(
                    h.actor.actor_id not in actors,
                    f"actor {h.actor.actor_id} on hosts {actors.get(h.actor.actor_id)} and {i}",
                )
                actors[h.actor.actor_id] = i
            if h.pid:
                check(h.pid not in pids, f"pid {h.pid} on hosts {pids.get(h.pid)} and {i}")
                pids[h.pid] = i
        counts = self.counts()
        check(sum(counts.values()) == len(self.hosts), f"counts {counts} for {len(self.hosts)} hosts")
        check(counts[HostState.BUSY] + counts[HostState.STOPPING] <= len(actors), f"counts {counts}, actors {actors}")

    # ---- helpers ----------------------------------------------------------------------------

    def _expect(self, index: int, state: HostState) -> Host:
        host = self.hosts[index]
        if host.state is not state:
            raise PoolStateError(f"host {index} is {host.state.value}, expected {state.value}")
        return host

    @staticmethod
    def _slot_ready(host: Host) -> pb.WorkerEvent:
        return pb.WorkerEvent(slot_ready=pb.SlotReady(slot=host.index, endpoint=host.endpoint))
