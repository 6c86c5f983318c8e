from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Payload(_message.Message):
    __slots__ = ("pickle", "buffers", "shared", "streamed", "bulk")
    PICKLE_FIELD_NUMBER: _ClassVar[int]
    BUFFERS_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    STREAMED_FIELD_NUMBER: _ClassVar[int]
    BULK_FIELD_NUMBER: _ClassVar[int]
    pickle: bytes
    buffers: _containers.RepeatedScalarFieldContainer[bytes]
    shared: _containers.RepeatedCompositeFieldContainer[SharedBuffer]
    streamed: _containers.RepeatedScalarFieldContainer[int]
    bulk: int
    def __init__(self, pickle: _Optional[bytes] = ..., buffers: _Optional[_Iterable[bytes]] = ..., shared: _Optional[_Iterable[_Union[SharedBuffer, _Mapping]]] = ..., streamed: _Optional[_Iterable[int]] = ..., bulk: _Optional[int] = ...) -> None: ...

class SharedBuffer(_message.Message):
    __slots__ = ("index", "name", "size")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    index: int
    name: str
    size: int
    def __init__(self, index: _Optional[int] = ..., name: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("num_cpus", "num_gpus", "max_memory_mb")
    NUM_CPUS_FIELD_NUMBER: _ClassVar[int]
    NUM_GPUS_FIELD_NUMBER: _ClassVar[int]
    MAX_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    num_cpus: int
    num_gpus: int
    max_memory_mb: int
    def __init__(self, num_cpus: _Optional[int] = ..., num_gpus: _Optional[int] = ..., max_memory_mb: _Optional[int] = ...) -> None: ...
