"""A forked child's client, in a process of its own.

gRPC cannot be used in a process forked from one that already used it (its threads and
polling state stay behind in the parent), and PARL programs fork: ``multiprocessing`` workers
that call ``parl.connect`` or create remote objects. In such a child, ``RelayBackend`` starts
``python -m actorrt.compat.parl._relay``, a fresh interpreter with a ``DirectBackend`` of its
own, and speaks to it over its stdin and stdout. Each message is an 8-byte length and a pickle
of ``(request id, operation, body)``, answers ``(request id, ok, body)``, sent as the relay's
calls finish; a body is a cloudpickle of the arguments, or of the value or error, pickled apart
so that one that cannot be unpickled fails its own request and nothing else.

Arguments are pickled on the caller's thread (errors at the call site); writes go through a
queue to one writer thread, so a release from a garbage collector's finalizer never waits or
interleaves with another message. The relay is the child's client: its actors stop when the
child closes it, and when the child dies (end of file on the relay's stdin). Whatever the
relay's actors print goes to the child's stderr.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO, Any

import cloudpickle

from actorrt.common.errors import ClusterConnectionError, SerializationError
from actorrt.compat.parl._backend import CallKind, DirectBackend
from actorrt.transport.serialization import ship_local_modules

__all__ = ["RelayBackend", "main"]

_LENGTH = struct.Struct("!Q")
_CONNECT_MARGIN_S = 60.0


def _write(stream: IO[bytes], data: bytes) -> None:
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _read(stream: IO[bytes]) -> bytes | None:
    """One message, or None at the end of the stream."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (n,) = _LENGTH.unpack(head)
    data = stream.read(n)
    return data if len(data) == n else None


class RelayBackend:
    """The ``Backend`` of a forked child: a relay process holds the cluster connection."""

    def __init__(self, address: str, files: Sequence[str], token: str | None = None, timeout: float = 30.0) -> None:
        self.address = address
        self.closed = False
        self.pid = os.getpid()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "actorrt.compat.parl._relay"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._pending_lock = threading.Lock()
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write_forever, name="parl-relay-writer", daemon=True)
        self._reader = threading.Thread(target=self._read_forever, name="parl-relay-reader", daemon=True)
        self._writer.start()
        self._reader.start()
        try:
            self._request("connect", address, list(files), token).result(timeout + _CONNECT_MARGIN_S)
        except BaseException:
            self.close()
            raise

    # ---- the pipe ---------------------------------------------------------------------------

    def _request(self, op: str, *args: Any) -> concurrent.futures.Future[Any]:
        if self.closed:
            raise ClusterConnectionError("this client was closed (parl.disconnect())")
        request_id = next(self._ids)
        ship_local_modules()  # the child's own modules travel by value, as from any client
        try:
            body = cloudpickle.dumps(args, protocol=5)
        except Exception as e:  # whatever pickling raises, it is the caller's argument
            raise SerializationError(f"arguments of {op} cannot be pickled: {e}") from e
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._pending_lock:
            self._pending[request_id] = fut
        self._outbox.put(pickle.dumps((request_id, op, body)))
        return fut

    def _write_forever(self) -> None:
        while (data := self._outbox.get()) is not None:
            try:
                _write(self._stdin, data)
            except (OSError, ValueError):  # the relay is gone; the reader fails what waits
                return
        try:
            self._stdin.close()
        except OSError:
            pass

    def _read_forever(self) -> None:
        while (data := _read(self._stdout)) is not None:
            request_id, ok, body = pickle.loads(data)
            try:
                value = cloudpickle.loads(body)
            except Exception as e:  # noqa: BLE001 - e.g. a class missing here: that call fails with it
                ok, value = False, e
            with self._pending_lock:
                fut = self._pending.pop(request_id, None)
            if fut is None:
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)
        code = self.proc.wait()
        self.closed = True
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_exception(ClusterConnectionError(f"this forked process's relay client exited (code {code})"))

    # ---- Backend ------------------------------------------------------------------------------

    def create(
        self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], num_gpus: int, max_memory_mb: int | None
    ) -> int:
        ref: int = self._request("create", cls, args, kwargs, num_gpus, max_memory_mb).result()
        return ref

    def call(
        self, ref: int, kind: CallKind, name: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> concurrent.futures.Future[Any]:
        return self._request("call", ref, kind, name, args, kwargs or {})

    def release(self, ref: int) -> None:
        self._tell("release", ref)

    def kill(self, ref: int) -> None:
        self._tell("kill", ref)

    def _tell(self, op: str, ref: int) -> None:
        """A step with no answer; safe in a finalizer (SimpleQueue.put is reentrant)."""
        if not self.closed and os.getpid() == self.pid:
            self._outbox.put(pickle.dumps((0, op, pickle.dumps((ref,)))))

    def baseline_bytes(self) -> int:
        value: int = self._request("baseline").result()
        return value

    def close(self, timeout: float = 30.0) -> None:
        """Close the relay's connection (its actors stop) and wait for it to exit."""
        if os.getpid() != self.pid:
            return
        self.closed = True
        self._outbox.put(None)  # the writer closes the relay's stdin: it closes and exits
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)


# ---- the relay process ----------------------------------------------------------------------


class _Relay:
    """The relay's side: one ``DirectBackend``; objects by number; answers through a queue."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.backend: DirectBackend | None = None
        self.objects: dict[int, Any] = {}
        self.numbers = itertools.count(1)
        self.answers: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.writer = threading.Thread(target=self._write_forever, name="relay-writer", daemon=True)
        self.writer.start()

    def _write_forever(self) -> None:
        while (data := self.answers.get()) is not None:
            _write(self.out, data)

    def answer(self, request_id: int, ok: bool, value: Any) -> None:
        try:
            body = cloudpickle.dumps(value, protocol=5)
        except Exception as e:  # noqa: BLE001 - the value cannot travel back; say so instead
            ok = False
            body = cloudpickle.dumps(
                SerializationError(f"the relay could not send back {type(value).__qualname__}: {e}")
            )
        self.answers.put(pickle.dumps((request_id, ok, body)))

    def answer_when_done(self, request_id: int, fut: concurrent.futures.Future[Any]) -> None:
        def settle(done: concurrent.futures.Future[Any]) -> None:
            error = done.exception()
            self.answer(request_id, error is None, error if error is not None else done.result())

        fut.add_done_callback(settle)

    def in_thread(self, request_id: int, work: Any) -> None:
        """Run a blocking ``work()`` (a creation, a measurement) without holding up the reader."""

        def run() -> None:
            try:
                value = work()
            except BaseException as e:  # noqa: BLE001 - every failure is the requester's answer
                self.answer(request_id, False, e)
            else:
                self.answer(request_id, True, value)

        threading.Thread(target=run, daemon=True).start()

    def handle(self, request_id: int, op: str, args: tuple[Any, ...]) -> None:
        backend = self.backend
        if op == "connect":
            address, files, token = args
            try:
                self.backend = DirectBackend(address, files, token)
            except BaseException as e:  # noqa: BLE001 - the child gets the error, with its text
                self.answer(request_id, False, e)
            else:
                self.answer(request_id, True, address)
            return
        assert backend is not None, "the first message must be connect"
        if op == "create":
            cls, cargs, ckwargs, num_gpus, max_memory_mb = args

            def create() -> int:
                number = next(self.numbers)
                self.objects[number] = backend.create(cls, cargs, ckwargs, num_gpus, max_memory_mb)
                return number

            self.in_thread(request_id, create)
        elif op == "call":
            number, kind, name, cargs, ckwargs = args
            try:
                fut = backend.call(self.objects[number], kind, name, cargs, ckwargs)
            except BaseException as e:  # noqa: BLE001 - e.g. an argument that cannot be pickled again
                self.answer(request_id, False, e)
            else:
                self.answer_when_done(request_id, fut)
        elif op in ("release", "kill"):
            ref = self.objects.pop(args[0], None)  # the relay's handle goes: released when idle
            if ref is not None and op == "kill":
                backend.kill(ref)
        elif op == "baseline":
            self.in_thread(request_id, backend.baseline_bytes)
        else:
            self.answer(request_id, False, ValueError(f"unknown relay operation {op!r}"))

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
        self.answers.put(None)
        self.writer.join(5)


def main() -> None:
    """The relay process: serve the forked child on stdin/stdout until it closes them."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what anything here prints (actor output included) goes to stderr, not the channel
    relay = _Relay(out)
    try:
        while (data := _read(sys.stdin.buffer)) is not None:
            request_id, op, body = pickle.loads(data)
            try:
                args = cloudpickle.loads(body)
            except Exception as e:  # noqa: BLE001 - e.g. a module the child has and this process lacks
                relay.answer(request_id, False, SerializationError(f"the relay could not unpickle {op}: {e}"))
                continue
            relay.handle(request_id, op, tuple(args))
    finally:
        relay.close()


if __name__ == "__main__":
    main()
