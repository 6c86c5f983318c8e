"""The error contract: every exception a user of actorrt can see.

gRPC status codes are mapped to these only at the boundary (``_rpc.py``); nothing above the
transport raises ``grpc.RpcError``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "SLOT_NOT_READY",
    "ActorDiedError",
    "ActorNameTakenError",
    "ActorNotFoundError",
    "ActorRTError",
    "AuthenticationError",
    "ClusterConnectionError",
    "MasterUnreachableError",
    "PlacementError",
    "ProtocolVersionError",
    "RemoteError",
    "SerializationError",
]

# How a worker says an actor never reached its host (the slot's warm host had just died); the
# master passes it on as the death's cause, and the client then places the actor again.
SLOT_NOT_READY = "its slot was not ready on the worker"


class ActorRTError(Exception):
    """Base class of every actorrt error."""


class RemoteError(ActorRTError):
    """A method raised inside the actor. The actor lives on.

    Where the original exception type could be rebuilt on this side, the raised object is also
    an instance of that type (``except ValueError`` works), and ``cause`` holds the original.

    Attributes:
        method: ``Class.method`` that raised.
        type_name: qualified name of the original exception type.
        remote_traceback: the traceback formatted inside the actor.
        cause: the original exception instance, or ``None`` when it could not be rebuilt.
    """

    method: str
    type_name: str
    remote_traceback: str
    cause: BaseException | None

    def __init__(
        self,
        method: str,
        type_name: str,
        message: str,
        remote_traceback: str,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self._fill(method, type_name, message, remote_traceback, cause)

    def _fill(
        self,
        method: str,
        type_name: str,
        message: str,
        remote_traceback: str,
        cause: BaseException | None,
    ) -> None:
        self.method = method
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback
        self.cause = cause

    def __str__(self) -> str:
        return (
            f"{self.method} raised {self.type_name}: {self.message}\n"
            f"--- remote traceback ---\n{self.remote_traceback.rstrip()}"
        )

    def __reduce__(self) -> Any:
        return (
            RemoteError,
            (self.method, self.type_name, self.message, self.remote_traceback, self.cause),
        )


_dual_classes: dict[type, type] = {}


def rebuild_remote_error(
    method: str,
    type_name: str,
    message: str,
    remote_traceback: str,
    cause: BaseException | None,
) -> RemoteError:
    """A ``RemoteError`` that is also an instance of ``type(cause)`` where that is possible."""
    if cause is not None and isinstance(cause, Exception) and not isinstance(cause, RemoteError):
        cls = type(cause)
        dual = _dual_classes.get(cls)
        if dual is None:
            try:
                dual = type(
                    f"RemoteError[{cls.__name__}]",
                    (RemoteError, cls),
                    {"__module__": __name__, "__reduce__": RemoteError.__reduce__},
                )
            except TypeError:  # incompatible layouts (e.g. some C extension exceptions)
                dual = RemoteError
            _dual_classes[cls] = dual
        if dual is not RemoteError:
            try:
                err: RemoteError = dual.__new__(dual, *cause.args)
                err.__dict__.update(getattr(cause, "__dict__", {}))
                err.args = cause.args
                RemoteError._fill(err, method, type_name, message, remote_traceback, cause)
                return err
            except Exception:  # noqa: BLE001 - fall back to the plain error below
                pass
    return RemoteError(method, type_name, message, remote_traceback, cause)


class ActorDiedError(ActorRTError):
    """The actor's process is gone: a call on it failed, or would have. Calls are never retried.

    Attributes:
        actor_id: the dead actor.
        cause: why it died, e.g. ``"killed by signal 9 (SIGKILL)"``.
    """

    def __init__(self, actor_id: str, cause: str) -> None:
        super().__init__(f"actor {actor_id} died: {cause}")
        self.actor_id = actor_id
        self.cause = cause

    def __reduce__(self) -> Any:
        return (ActorDiedError, (self.actor_id, self.cause))

    def copy(self) -> ActorDiedError:
        """The same error, to raise in one more place. One instance raised in many keeps every
        traceback it went through, and with them the frames' locals (handles: their actor is
        never released), growing at each raise."""
        return ActorDiedError(self.actor_id, self.cause)


class SerializationError(ActorRTError, TypeError):
    """A value could not be pickled: raised at the call site, before anything is sent. Inside an
    actor (a return value it could not pickle, arguments it could not unpickle) it is the
    ``cause`` of the call's ``RemoteError``."""


class PlacementError(ActorRTError):
    """No slot within the timeout, or resources that no node can ever provide."""


class ActorNameTakenError(PlacementError):
    """``Cls.options(name=...)``: another live actor of the cluster has that name."""


class ActorNotFoundError(ActorRTError, LookupError):
    """``actorrt.get_actor(name)``: no live actor of the cluster has that name."""


class ClusterConnectionError(ActorRTError, ConnectionError):
    """The cluster could not be reached or refused this process."""


class MasterUnreachableError(ClusterConnectionError):
    """Nothing answers at the master's address."""


class AuthenticationError(ClusterConnectionError):
    """The cluster refused the token (missing or wrong)."""


class ProtocolVersionError(ClusterConnectionError):
    """The peer speaks another protocol version."""
