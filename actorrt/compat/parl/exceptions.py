"""PARL's errors, by PARL's names: what a PARL program catches, raised by ``actorrt.compat.parl``.

Each error from the runtime keeps the actorrt error it came from as ``__cause__`` (a
``RemoteError`` with the remote traceback, an ``ActorDiedError`` with why the actor died).

| error | when |
|---|---|
| ``RemoteError`` | a remote method (or the constructor) raised, or the remote object is gone |
| ``RemoteSerializeError`` | the remote object could not pickle what a method returned |
| ``RemoteDeserializeError`` | the remote object could not unpickle a call's arguments |
| ``RemoteAttributeError`` | the remote object has no such attribute (an ``AttributeError`` there) |
| ``ResourceError`` | no slot for the object within the placement timeout, or resources no node has |
| ``FutureGetRepeatedlyError`` | ``FutureObject.get()`` after it already returned |
| ``FutureFunctionError`` | a ``wait=False`` call failed (its cause is the error above it) |
| ``FutureObjectEmpty`` | ``get_nowait()``, or ``get(timeout=...)``, before the value is there |
"""

from __future__ import annotations

__all__ = [
    "FutureFunctionError",
    "FutureGetRepeatedlyError",
    "FutureObjectEmpty",
    "RemoteAttributeError",
    "RemoteDeserializeError",
    "RemoteError",
    "RemoteSerializeError",
    "ResourceError",
]


class ResourceError(Exception):
    """No slot for the remote object: none freed within the placement timeout, or the object
    asks for resources (``n_gpu``) that no node of the cluster has."""

    def __init__(self, error_info: str) -> None:
        super().__init__(error_info)
        self.error_info = error_info

    def __str__(self) -> str:
        return self.error_info


class RemoteError(Exception):
    """Something went wrong in the remote object while calling ``func_name``. Base class of the
    other ``Remote*`` errors."""

    def __init__(self, func_name: str, error_info: str) -> None:
        super().__init__(func_name, error_info)
        self.func_name = func_name
        self.error_info = f"[Error occurred in the remote object, when calling `{func_name}`]:\n{error_info}"

    def __str__(self) -> str:
        return self.error_info


class RemoteSerializeError(RemoteError):
    """The remote object could not pickle the value ``func_name`` returned."""


class RemoteDeserializeError(RemoteError):
    """The remote object could not unpickle the arguments of a call to ``func_name``."""


class RemoteAttributeError(RemoteError):
    """The remote object has no attribute ``func_name`` (or an ``AttributeError`` was raised there)."""


class FutureGetRepeatedlyError(Exception):
    """``FutureObject.get()`` was called again after it had returned its value."""

    def __init__(self) -> None:
        super().__init__()
        self.error_info = (
            "the `get` of this FutureObject has already returned its value: each FutureObject gives its value once"
        )

    def __str__(self) -> str:
        return self.error_info


class FutureFunctionError(Exception):
    """A call made with ``wait=False`` failed; ``__cause__`` is what failed (a ``RemoteError``).
    The remote object was reset: its later uses raise this error again."""

    def __init__(self, func_name: str) -> None:
        super().__init__(func_name)
        self.func_name = func_name
        self.error_info = (
            f"an error was raised when calling the future function `{func_name}`; its cause is shown above "
            "(the remote object was reset, as PARL resets it: create a new one)"
        )

    def __str__(self) -> str:
        return self.error_info


class FutureObjectEmpty(Exception):  # noqa: N818 - PARL's name, which PARL programs catch
    """``get_nowait()``, or ``get(timeout=...)``, found no value yet."""

    def __init__(self) -> None:
        super().__init__()
        self.error_info = "the result is not available yet"

    def __str__(self) -> str:
        return self.error_info
