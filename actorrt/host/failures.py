"""What an error reply carries: an exception raised by an actor's method, or its construction,
as the caller will rebuild it (``actorrt.RemoteError``): the exception pickled where it fits in
one message, its type's name, its message and its traceback, each cut to a bound. Host loop."""

from __future__ import annotations

import traceback
from collections.abc import Callable

from actorrt.transport.codec import MAX_IN_MESSAGE, PayloadTooLargeError, describe_size
from actorrt.transport.serialization import EMPTY, dumps
from actorrt.v1 import actor_host_pb2 as pb

EXIT_CODE_SHOWN = 300  # characters of a sys.exit() argument in the exit cause


FAILURE_TEXT_MAX = 1 << 20  # characters of an error's message, and of its traceback, a reply carries


def failure_of(exc: BaseException, skip_frames: int = 1) -> tuple[pb.RemoteFailure, int]:
    """What an error reply carries, and a bound on its encoded size: the exception pickled (so
    the caller can raise its type, with its attributes), its message and its traceback. One
    message carries it, so a pickle over what that holds (an exception keeping a large array) is
    dropped, saying so, and texts are cut to ``FAILURE_TEXT_MAX`` characters; the type, message
    and traceback still travel. Sizes are added up, never asked of protobuf (which would encode
    the message to tell, and fails at 2 GiB)."""
    tb = exc.__traceback__
    for _ in range(skip_frames):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    text = _cut(_text_of(lambda: "".join(traceback.format_exception(type(exc), exc, tb))))
    message = _cut(_text_of(lambda: str(exc)))
    type_name = _cut(_text_of(lambda: f"{type(exc).__module__}.{type(exc).__qualname__}"))
    texts = 4 * (len(text) + len(message) + len(type_name)) + 64  # utf-8: 4 bytes a character at most
    payload, size = EMPTY, 0
    try:
        payload = dumps(exc, limit=max(1, MAX_IN_MESSAGE - texts - 64))
        # each buffer's tag and length: 11 bytes at most, and the payload's own
        size = len(payload.pickle) + sum(len(b) for b in payload.buffers) + 11 * (len(payload.buffers) + 2)
        if size + texts > MAX_IN_MESSAGE:
            raise PayloadTooLargeError(size, MAX_IN_MESSAGE, in_band=True)
    except PayloadTooLargeError as e:
        payload, size = EMPTY, 0
        message += (
            f" [the exception pickled to {describe_size(e.size)}, over what one message carries: "
            "it comes as its type, message and traceback]"
        )
        texts += 4 * 200
    except Exception:  # noqa: BLE001 - the type and message still travel
        payload, size = EMPTY, 0
    failure = pb.RemoteFailure(type_name=type_name, message=message, traceback=text, exception=payload)
    return failure, size + texts


def _text_of(make: Callable[[], str]) -> str:
    """``make()``, or what it raised; characters UTF-8 cannot encode (lone surrogates, as
    ``surrogateescape`` makes) escaped, since protobuf refuses them."""
    try:
        text = make()
    except Exception as e:  # noqa: BLE001 - a __str__ that raises: say so instead
        text = f"<the text could not be made: {type(e).__name__}: {e}>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _cut(text: str) -> str:
    if len(text) <= FAILURE_TEXT_MAX:
        return text
    return f"{text[: FAILURE_TEXT_MAX // 2]}\n... ({len(text) - FAILURE_TEXT_MAX} characters cut) ...\n{text[-FAILURE_TEXT_MAX // 2 :]}"
