from actorrt.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CallKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CALL_KIND_UNSPECIFIED: _ClassVar[CallKind]
    CALL_KIND_METHOD: _ClassVar[CallKind]
    CALL_KIND_GET_ATTR: _ClassVar[CallKind]
    CALL_KIND_SET_ATTR: _ClassVar[CallKind]
    CALL_KIND_LIST_ATTRS: _ClassVar[CallKind]
CALL_KIND_UNSPECIFIED: CallKind
CALL_KIND_METHOD: CallKind
CALL_KIND_GET_ATTR: CallKind
CALL_KIND_SET_ATTR: CallKind
CALL_KIND_LIST_ATTRS: CallKind

class CallBatch(_message.Message):
    __slots__ = ("construct", "attach", "calls", "released", "chunk", "split_bytes", "bulk_reopen", "dropped_frames")
    class DroppedFramesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    CONSTRUCT_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    SPLIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    BULK_REOPEN_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FRAMES_FIELD_NUMBER: _ClassVar[int]
    construct: ConstructActor
    attach: AttachActor
    calls: _containers.RepeatedCompositeFieldContainer[Call]
    released: _containers.RepeatedScalarFieldContainer[str]
    chunk: Chunk
    split_bytes: int
    bulk_reopen: bool
    dropped_frames: _containers.ScalarMap[int, int]
    def __init__(self, construct: _Optional[_Union[ConstructActor, _Mapping]] = ..., attach: _Optional[_Union[AttachActor, _Mapping]] = ..., calls: _Optional[_Iterable[_Union[Call, _Mapping]]] = ..., released: _Optional[_Iterable[str]] = ..., chunk: _Optional[_Union[Chunk, _Mapping]] = ..., split_bytes: _Optional[int] = ..., bulk_reopen: _Optional[bool] = ..., dropped_frames: _Optional[_Mapping[int, int]] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class ConstructActor(_message.Message):
    __slots__ = ("version", "actor_id", "class_name", "spec", "max_concurrency", "gpu_ids", "files", "max_payload_bytes", "shm_probe", "restarts")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHM_PROBE_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    version: int
    actor_id: str
    class_name: str
    spec: _common_pb2.Payload
    max_concurrency: int
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    files: _containers.RepeatedCompositeFieldContainer[ShippedFile]
    max_payload_bytes: int
    shm_probe: str
    restarts: int
    def __init__(self, version: _Optional[int] = ..., actor_id: _Optional[str] = ..., class_name: _Optional[str] = ..., spec: _Optional[_Union[_common_pb2.Payload, _Mapping]] = ..., max_concurrency: _Optional[int] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., files: _Optional[_Iterable[_Union[ShippedFile, _Mapping]]] = ..., max_payload_bytes: _Optional[int] = ..., shm_probe: _Optional[str] = ..., restarts: _Optional[int] = ...) -> None: ...

class ShippedFile(_message.Message):
    __slots__ = ("path", "data", "mode")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    path: str
    data: bytes
    mode: int
    def __init__(self, path: _Optional[str] = ..., data: _Optional[bytes] = ..., mode: _Optional[int] = ...) -> None: ...

class AttachActor(_message.Message):
    __slots__ = ("version", "actor_id", "shm_probe")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    SHM_PROBE_FIELD_NUMBER: _ClassVar[int]
    version: int
    actor_id: str
    shm_probe: str
    def __init__(self, version: _Optional[int] = ..., actor_id: _Optional[str] = ..., shm_probe: _Optional[str] = ...) -> None: ...

class Call(_message.Message):
    __slots__ = ("seq", "method", "args", "kind")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    seq: int
    method: str
    args: _common_pb2.Payload
    kind: CallKind
    def __init__(self, seq: _Optional[int] = ..., method: _Optional[str] = ..., args: _Optional[_Union[_common_pb2.Payload, _Mapping]] = ..., kind: _Optional[_Union[CallKind, str]] = ...) -> None: ...

class ReplyBatch(_message.Message):
    __slots__ = ("replies", "shared_memory", "released", "chunk", "bulk_port", "bulk_key")
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    BULK_PORT_FIELD_NUMBER: _ClassVar[int]
    BULK_KEY_FIELD_NUMBER: _ClassVar[int]
    replies: _containers.RepeatedCompositeFieldContainer[Reply]
    shared_memory: bool
    released: _containers.RepeatedScalarFieldContainer[str]
    chunk: Chunk
    bulk_port: int
    bulk_key: bytes
    def __init__(self, replies: _Optional[_Iterable[_Union[Reply, _Mapping]]] = ..., shared_memory: _Optional[bool] = ..., released: _Optional[_Iterable[str]] = ..., chunk: _Optional[_Union[Chunk, _Mapping]] = ..., bulk_port: _Optional[int] = ..., bulk_key: _Optional[bytes] = ...) -> None: ...

class Reply(_message.Message):
    __slots__ = ("seq", "value", "error", "copies")
    class CopiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SEQ_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    COPIES_FIELD_NUMBER: _ClassVar[int]
    seq: int
    value: _common_pb2.Payload
    error: RemoteFailure
    copies: _containers.ScalarMap[str, str]
    def __init__(self, seq: _Optional[int] = ..., value: _Optional[_Union[_common_pb2.Payload, _Mapping]] = ..., error: _Optional[_Union[RemoteFailure, _Mapping]] = ..., copies: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RemoteFailure(_message.Message):
    __slots__ = ("type_name", "message", "traceback", "exception")
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    type_name: str
    message: str
    traceback: str
    exception: _common_pb2.Payload
    def __init__(self, type_name: _Optional[str] = ..., message: _Optional[str] = ..., traceback: _Optional[str] = ..., exception: _Optional[_Union[_common_pb2.Payload, _Mapping]] = ...) -> None: ...
