from actorrt.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Scheduling(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEDULING_UNSPECIFIED: _ClassVar[Scheduling]
    SCHEDULING_SPREAD: _ClassVar[Scheduling]

class PlacementFailure(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PLACEMENT_FAILURE_UNSPECIFIED: _ClassVar[PlacementFailure]
    PLACEMENT_FAILURE_NAME_TAKEN: _ClassVar[PlacementFailure]
SCHEDULING_UNSPECIFIED: Scheduling
SCHEDULING_SPREAD: Scheduling
PLACEMENT_FAILURE_UNSPECIFIED: PlacementFailure
PLACEMENT_FAILURE_NAME_TAKEN: PlacementFailure

class WorkerEvent(_message.Message):
    __slots__ = ("register_worker", "heartbeat", "slot_ready", "actor_exited", "actor_output", "actor_log", "slot_lost")
    REGISTER_WORKER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    SLOT_READY_FIELD_NUMBER: _ClassVar[int]
    ACTOR_EXITED_FIELD_NUMBER: _ClassVar[int]
    ACTOR_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_LOG_FIELD_NUMBER: _ClassVar[int]
    SLOT_LOST_FIELD_NUMBER: _ClassVar[int]
    register_worker: RegisterWorker
    heartbeat: Heartbeat
    slot_ready: SlotReady
    actor_exited: ActorExited
    actor_output: ActorOutput
    actor_log: ActorLog
    slot_lost: SlotLost
    def __init__(self, register_worker: _Optional[_Union[RegisterWorker, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., slot_ready: _Optional[_Union[SlotReady, _Mapping]] = ..., actor_exited: _Optional[_Union[ActorExited, _Mapping]] = ..., actor_output: _Optional[_Union[ActorOutput, _Mapping]] = ..., actor_log: _Optional[_Union[ActorLog, _Mapping]] = ..., slot_lost: _Optional[_Union[SlotLost, _Mapping]] = ...) -> None: ...

class RegisterWorker(_message.Message):
    __slots__ = ("version", "node", "node_ip", "cpus", "gpus", "memory_bytes", "worker_id", "live_actors", "pid", "exited")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    NODE_IP_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LIVE_ACTORS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    version: int
    node: str
    node_ip: str
    cpus: int
    gpus: int
    memory_bytes: int
    worker_id: str
    live_actors: _containers.RepeatedCompositeFieldContainer[LiveActor]
    pid: int
    exited: _containers.RepeatedCompositeFieldContainer[ActorExited]
    def __init__(self, version: _Optional[int] = ..., node: _Optional[str] = ..., node_ip: _Optional[str] = ..., cpus: _Optional[int] = ..., gpus: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., worker_id: _Optional[str] = ..., live_actors: _Optional[_Iterable[_Union[LiveActor, _Mapping]]] = ..., pid: _Optional[int] = ..., exited: _Optional[_Iterable[_Union[ActorExited, _Mapping]]] = ...) -> None: ...

class LiveActor(_message.Message):
    __slots__ = ("actor_id", "slot", "endpoint", "client_id", "class_name", "resources", "gpu_ids", "name", "detached", "max_restarts", "restarts", "shape")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DETACHED_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    slot: int
    endpoint: str
    client_id: str
    class_name: str
    resources: _common_pb2.Resources
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    name: str
    detached: bool
    max_restarts: int
    restarts: int
    shape: ActorShape
    def __init__(self, actor_id: _Optional[str] = ..., slot: _Optional[int] = ..., endpoint: _Optional[str] = ..., client_id: _Optional[str] = ..., class_name: _Optional[str] = ..., resources: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., name: _Optional[str] = ..., detached: _Optional[bool] = ..., max_restarts: _Optional[int] = ..., restarts: _Optional[int] = ..., shape: _Optional[_Union[ActorShape, _Mapping]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("load", "actor_rss_bytes", "cpu_percent", "memory_used_bytes", "actor_load")
    class ActorRssBytesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class ActorLoadEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ActorLoad
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ActorLoad, _Mapping]] = ...) -> None: ...
    LOAD_FIELD_NUMBER: _ClassVar[int]
    ACTOR_RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    ACTOR_LOAD_FIELD_NUMBER: _ClassVar[int]
    load: float
    actor_rss_bytes: _containers.ScalarMap[str, int]
    cpu_percent: float
    memory_used_bytes: int
    actor_load: _containers.MessageMap[str, ActorLoad]
    def __init__(self, load: _Optional[float] = ..., actor_rss_bytes: _Optional[_Mapping[str, int]] = ..., cpu_percent: _Optional[float] = ..., memory_used_bytes: _Optional[int] = ..., actor_load: _Optional[_Mapping[str, ActorLoad]] = ...) -> None: ...

class ActorLoad(_message.Message):
    __slots__ = ("cpu_percent", "calls_per_s")
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    CALLS_PER_S_FIELD_NUMBER: _ClassVar[int]
    cpu_percent: float
    calls_per_s: float
    def __init__(self, cpu_percent: _Optional[float] = ..., calls_per_s: _Optional[float] = ...) -> None: ...

class SlotReady(_message.Message):
    __slots__ = ("slot", "endpoint")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    slot: int
    endpoint: str
    def __init__(self, slot: _Optional[int] = ..., endpoint: _Optional[str] = ...) -> None: ...

class SlotLost(_message.Message):
    __slots__ = ("slot", "cause")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    slot: int
    cause: str
    def __init__(self, slot: _Optional[int] = ..., cause: _Optional[str] = ...) -> None: ...

class ActorExited(_message.Message):
    __slots__ = ("actor_id", "slot", "cause", "exit_code")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    slot: int
    cause: str
    exit_code: int
    def __init__(self, actor_id: _Optional[str] = ..., slot: _Optional[int] = ..., cause: _Optional[str] = ..., exit_code: _Optional[int] = ...) -> None: ...

class WorkerCommand(_message.Message):
    __slots__ = ("worker_registered", "start_actor", "stop_actor", "read_actor_log", "cluster_stopped")
    WORKER_REGISTERED_FIELD_NUMBER: _ClassVar[int]
    START_ACTOR_FIELD_NUMBER: _ClassVar[int]
    STOP_ACTOR_FIELD_NUMBER: _ClassVar[int]
    READ_ACTOR_LOG_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_STOPPED_FIELD_NUMBER: _ClassVar[int]
    worker_registered: WorkerRegistered
    start_actor: StartActor
    stop_actor: StopActor
    read_actor_log: ReadActorLog
    cluster_stopped: ClusterStopped
    def __init__(self, worker_registered: _Optional[_Union[WorkerRegistered, _Mapping]] = ..., start_actor: _Optional[_Union[StartActor, _Mapping]] = ..., stop_actor: _Optional[_Union[StopActor, _Mapping]] = ..., read_actor_log: _Optional[_Union[ReadActorLog, _Mapping]] = ..., cluster_stopped: _Optional[_Union[ClusterStopped, _Mapping]] = ...) -> None: ...

class WorkerRegistered(_message.Message):
    __slots__ = ("worker_id", "heartbeat_interval_s")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    heartbeat_interval_s: float
    def __init__(self, worker_id: _Optional[str] = ..., heartbeat_interval_s: _Optional[float] = ...) -> None: ...

class StartActor(_message.Message):
    __slots__ = ("actor_id", "slot", "client_id", "resources", "gpu_ids", "class_name", "name", "detached", "max_restarts", "restarts", "shape")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DETACHED_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    slot: int
    client_id: str
    resources: _common_pb2.Resources
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    class_name: str
    name: str
    detached: bool
    max_restarts: int
    restarts: int
    shape: ActorShape
    def __init__(self, actor_id: _Optional[str] = ..., slot: _Optional[int] = ..., client_id: _Optional[str] = ..., resources: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., class_name: _Optional[str] = ..., name: _Optional[str] = ..., detached: _Optional[bool] = ..., max_restarts: _Optional[int] = ..., restarts: _Optional[int] = ..., shape: _Optional[_Union[ActorShape, _Mapping]] = ...) -> None: ...

class StopActor(_message.Message):
    __slots__ = ("actor_id", "reason")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    reason: str
    def __init__(self, actor_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ClusterStopped(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class ClientEvent(_message.Message):
    __slots__ = ("open_session", "place_actor", "release_actor", "close_session", "add_ref", "drop_ref", "lookup_actor", "withdraw_placement", "confirm_actors")
    OPEN_SESSION_FIELD_NUMBER: _ClassVar[int]
    PLACE_ACTOR_FIELD_NUMBER: _ClassVar[int]
    RELEASE_ACTOR_FIELD_NUMBER: _ClassVar[int]
    CLOSE_SESSION_FIELD_NUMBER: _ClassVar[int]
    ADD_REF_FIELD_NUMBER: _ClassVar[int]
    DROP_REF_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_ACTOR_FIELD_NUMBER: _ClassVar[int]
    WITHDRAW_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_ACTORS_FIELD_NUMBER: _ClassVar[int]
    open_session: OpenSession
    place_actor: PlaceActor
    release_actor: ReleaseActor
    close_session: CloseSession
    add_ref: AddRef
    drop_ref: DropRef
    lookup_actor: LookupActor
    withdraw_placement: WithdrawPlacement
    confirm_actors: ConfirmActors
    def __init__(self, open_session: _Optional[_Union[OpenSession, _Mapping]] = ..., place_actor: _Optional[_Union[PlaceActor, _Mapping]] = ..., release_actor: _Optional[_Union[ReleaseActor, _Mapping]] = ..., close_session: _Optional[_Union[CloseSession, _Mapping]] = ..., add_ref: _Optional[_Union[AddRef, _Mapping]] = ..., drop_ref: _Optional[_Union[DropRef, _Mapping]] = ..., lookup_actor: _Optional[_Union[LookupActor, _Mapping]] = ..., withdraw_placement: _Optional[_Union[WithdrawPlacement, _Mapping]] = ..., confirm_actors: _Optional[_Union[ConfirmActors, _Mapping]] = ...) -> None: ...

class ConfirmActors(_message.Message):
    __slots__ = ("actor_ids", "kept", "given_up")
    ACTOR_IDS_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    GIVEN_UP_FIELD_NUMBER: _ClassVar[int]
    actor_ids: _containers.RepeatedScalarFieldContainer[str]
    kept: _containers.RepeatedCompositeFieldContainer[KeptActor]
    given_up: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, actor_ids: _Optional[_Iterable[str]] = ..., kept: _Optional[_Iterable[_Union[KeptActor, _Mapping]]] = ..., given_up: _Optional[_Iterable[str]] = ...) -> None: ...

class KeptActor(_message.Message):
    __slots__ = ("actor_id", "placement", "restarts", "held")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    placement: PlaceActor
    restarts: int
    held: bool
    def __init__(self, actor_id: _Optional[str] = ..., placement: _Optional[_Union[PlaceActor, _Mapping]] = ..., restarts: _Optional[int] = ..., held: _Optional[bool] = ...) -> None: ...

class WithdrawPlacement(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    def __init__(self, request_id: _Optional[int] = ...) -> None: ...

class OpenSession(_message.Message):
    __slots__ = ("version", "client_id", "hostname", "pid", "mute_actor_output", "actor_id")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    MUTE_ACTOR_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    version: int
    client_id: str
    hostname: str
    pid: int
    mute_actor_output: bool
    actor_id: str
    def __init__(self, version: _Optional[int] = ..., client_id: _Optional[str] = ..., hostname: _Optional[str] = ..., pid: _Optional[int] = ..., mute_actor_output: _Optional[bool] = ..., actor_id: _Optional[str] = ...) -> None: ...

class PlaceActor(_message.Message):
    __slots__ = ("request_id", "resources", "class_name", "timeout_s", "name", "detached", "max_restarts", "scheduling", "node", "shape")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DETACHED_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    resources: _common_pb2.Resources
    class_name: str
    timeout_s: float
    name: str
    detached: bool
    max_restarts: int
    scheduling: Scheduling
    node: str
    shape: ActorShape
    def __init__(self, request_id: _Optional[int] = ..., resources: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., class_name: _Optional[str] = ..., timeout_s: _Optional[float] = ..., name: _Optional[str] = ..., detached: _Optional[bool] = ..., max_restarts: _Optional[int] = ..., scheduling: _Optional[_Union[Scheduling, str]] = ..., node: _Optional[str] = ..., shape: _Optional[_Union[ActorShape, _Mapping]] = ...) -> None: ...

class ActorShape(_message.Message):
    __slots__ = ("methods", "attributes")
    METHODS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    methods: _containers.RepeatedScalarFieldContainer[str]
    attributes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, methods: _Optional[_Iterable[str]] = ..., attributes: _Optional[_Iterable[str]] = ...) -> None: ...

class AddRef(_message.Message):
    __slots__ = ("actor_id", "token")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    token: str
    def __init__(self, actor_id: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class DropRef(_message.Message):
    __slots__ = ("actor_id", "token", "receiver")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    token: str
    receiver: str
    def __init__(self, actor_id: _Optional[str] = ..., token: _Optional[str] = ..., receiver: _Optional[str] = ...) -> None: ...

class LookupActor(_message.Message):
    __slots__ = ("request_id", "name", "actor_id")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    name: str
    actor_id: str
    def __init__(self, request_id: _Optional[int] = ..., name: _Optional[str] = ..., actor_id: _Optional[str] = ...) -> None: ...

class ReleaseActor(_message.Message):
    __slots__ = ("actor_id", "reason")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    reason: str
    def __init__(self, actor_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CloseSession(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClientNotice(_message.Message):
    __slots__ = ("session_opened", "actor_placed", "placement_failed", "actor_died", "actor_output", "actor_found", "actor_restarting", "actor_moved")
    SESSION_OPENED_FIELD_NUMBER: _ClassVar[int]
    ACTOR_PLACED_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FAILED_FIELD_NUMBER: _ClassVar[int]
    ACTOR_DIED_FIELD_NUMBER: _ClassVar[int]
    ACTOR_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FOUND_FIELD_NUMBER: _ClassVar[int]
    ACTOR_RESTARTING_FIELD_NUMBER: _ClassVar[int]
    ACTOR_MOVED_FIELD_NUMBER: _ClassVar[int]
    session_opened: SessionOpened
    actor_placed: ActorPlaced
    placement_failed: PlacementFailed
    actor_died: ActorDied
    actor_output: ActorOutput
    actor_found: ActorFound
    actor_restarting: ActorRestarting
    actor_moved: ActorMoved
    def __init__(self, session_opened: _Optional[_Union[SessionOpened, _Mapping]] = ..., actor_placed: _Optional[_Union[ActorPlaced, _Mapping]] = ..., placement_failed: _Optional[_Union[PlacementFailed, _Mapping]] = ..., actor_died: _Optional[_Union[ActorDied, _Mapping]] = ..., actor_output: _Optional[_Union[ActorOutput, _Mapping]] = ..., actor_found: _Optional[_Union[ActorFound, _Mapping]] = ..., actor_restarting: _Optional[_Union[ActorRestarting, _Mapping]] = ..., actor_moved: _Optional[_Union[ActorMoved, _Mapping]] = ...) -> None: ...

class SessionOpened(_message.Message):
    __slots__ = ("client_id", "version")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    version: int
    def __init__(self, client_id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class ActorPlaced(_message.Message):
    __slots__ = ("request_id", "actor_id", "endpoint", "node", "gpu_ids")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    actor_id: str
    endpoint: str
    node: str
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, request_id: _Optional[int] = ..., actor_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., node: _Optional[str] = ..., gpu_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class PlacementFailed(_message.Message):
    __slots__ = ("request_id", "reason", "code")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    reason: str
    code: PlacementFailure
    def __init__(self, request_id: _Optional[int] = ..., reason: _Optional[str] = ..., code: _Optional[_Union[PlacementFailure, str]] = ...) -> None: ...

class ActorFound(_message.Message):
    __slots__ = ("request_id", "actor_id", "reason", "endpoint", "class_name", "shape", "max_restarts")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    actor_id: str
    reason: str
    endpoint: str
    class_name: str
    shape: ActorShape
    max_restarts: int
    def __init__(self, request_id: _Optional[int] = ..., actor_id: _Optional[str] = ..., reason: _Optional[str] = ..., endpoint: _Optional[str] = ..., class_name: _Optional[str] = ..., shape: _Optional[_Union[ActorShape, _Mapping]] = ..., max_restarts: _Optional[int] = ...) -> None: ...

class ActorRestarting(_message.Message):
    __slots__ = ("actor_id", "cause", "restarts")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    cause: str
    restarts: int
    def __init__(self, actor_id: _Optional[str] = ..., cause: _Optional[str] = ..., restarts: _Optional[int] = ...) -> None: ...

class ActorMoved(_message.Message):
    __slots__ = ("actor_id", "endpoint", "node", "gpu_ids", "construct", "restarts")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    CONSTRUCT_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    endpoint: str
    node: str
    gpu_ids: _containers.RepeatedScalarFieldContainer[int]
    construct: bool
    restarts: int
    def __init__(self, actor_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., node: _Optional[str] = ..., gpu_ids: _Optional[_Iterable[int]] = ..., construct: _Optional[bool] = ..., restarts: _Optional[int] = ...) -> None: ...

class ActorDied(_message.Message):
    __slots__ = ("actor_id", "cause", "exit_code")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    cause: str
    exit_code: int
    def __init__(self, actor_id: _Optional[str] = ..., cause: _Optional[str] = ..., exit_code: _Optional[int] = ...) -> None: ...

class GetClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetClusterStatusResponse(_message.Message):
    __slots__ = ("version", "address", "uptime_s", "nodes", "actors", "clients", "placements_waiting")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    ACTORS_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    PLACEMENTS_WAITING_FIELD_NUMBER: _ClassVar[int]
    version: int
    address: str
    uptime_s: float
    nodes: _containers.RepeatedCompositeFieldContainer[NodeStatus]
    actors: _containers.RepeatedCompositeFieldContainer[ActorStatus]
    clients: _containers.RepeatedCompositeFieldContainer[ClientStatus]
    placements_waiting: int
    def __init__(self, version: _Optional[int] = ..., address: _Optional[str] = ..., uptime_s: _Optional[float] = ..., nodes: _Optional[_Iterable[_Union[NodeStatus, _Mapping]]] = ..., actors: _Optional[_Iterable[_Union[ActorStatus, _Mapping]]] = ..., clients: _Optional[_Iterable[_Union[ClientStatus, _Mapping]]] = ..., placements_waiting: _Optional[int] = ...) -> None: ...

class NodeStatus(_message.Message):
    __slots__ = ("worker_id", "node", "node_ip", "cpus", "cpus_used", "gpus", "gpus_used", "slots_ready", "load", "pid", "connected", "cpu_percent", "memory_used_bytes", "calls_per_s")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    NODE_IP_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    CPUS_USED_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPUS_USED_FIELD_NUMBER: _ClassVar[int]
    SLOTS_READY_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    CALLS_PER_S_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    node: str
    node_ip: str
    cpus: int
    cpus_used: int
    gpus: int
    gpus_used: int
    slots_ready: int
    load: float
    pid: int
    connected: bool
    cpu_percent: float
    memory_used_bytes: int
    calls_per_s: float
    def __init__(self, worker_id: _Optional[str] = ..., node: _Optional[str] = ..., node_ip: _Optional[str] = ..., cpus: _Optional[int] = ..., cpus_used: _Optional[int] = ..., gpus: _Optional[int] = ..., gpus_used: _Optional[int] = ..., slots_ready: _Optional[int] = ..., load: _Optional[float] = ..., pid: _Optional[int] = ..., connected: _Optional[bool] = ..., cpu_percent: _Optional[float] = ..., memory_used_bytes: _Optional[int] = ..., calls_per_s: _Optional[float] = ...) -> None: ...

class ActorStatus(_message.Message):
    __slots__ = ("actor_id", "class_name", "worker_id", "node", "slot", "client_id", "endpoint", "rss_bytes", "resources", "name", "detached", "restarts", "max_restarts", "holders", "restarting", "cpu_percent", "calls_per_s")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DETACHED_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    RESTARTING_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    CALLS_PER_S_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    class_name: str
    worker_id: str
    node: str
    slot: int
    client_id: str
    endpoint: str
    rss_bytes: int
    resources: _common_pb2.Resources
    name: str
    detached: bool
    restarts: int
    max_restarts: int
    holders: int
    restarting: bool
    cpu_percent: float
    calls_per_s: float
    def __init__(self, actor_id: _Optional[str] = ..., class_name: _Optional[str] = ..., worker_id: _Optional[str] = ..., node: _Optional[str] = ..., slot: _Optional[int] = ..., client_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., rss_bytes: _Optional[int] = ..., resources: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., name: _Optional[str] = ..., detached: _Optional[bool] = ..., restarts: _Optional[int] = ..., max_restarts: _Optional[int] = ..., holders: _Optional[int] = ..., restarting: _Optional[bool] = ..., cpu_percent: _Optional[float] = ..., calls_per_s: _Optional[float] = ...) -> None: ...

class ClientStatus(_message.Message):
    __slots__ = ("client_id", "hostname", "pid", "actors", "connected")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    ACTORS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    hostname: str
    pid: int
    actors: int
    connected: bool
    def __init__(self, client_id: _Optional[str] = ..., hostname: _Optional[str] = ..., pid: _Optional[int] = ..., actors: _Optional[int] = ..., connected: _Optional[bool] = ...) -> None: ...

class ActorOutput(_message.Message):
    __slots__ = ("actor_id", "class_name", "pid", "lines")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    class_name: str
    pid: int
    lines: _containers.RepeatedCompositeFieldContainer[OutputLine]
    def __init__(self, actor_id: _Optional[str] = ..., class_name: _Optional[str] = ..., pid: _Optional[int] = ..., lines: _Optional[_Iterable[_Union[OutputLine, _Mapping]]] = ...) -> None: ...

class OutputLine(_message.Message):
    __slots__ = ("text", "stderr")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    text: str
    stderr: bool
    def __init__(self, text: _Optional[str] = ..., stderr: _Optional[bool] = ...) -> None: ...

class ReadActorLog(_message.Message):
    __slots__ = ("request_id", "actor_id", "max_bytes")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    actor_id: str
    max_bytes: int
    def __init__(self, request_id: _Optional[int] = ..., actor_id: _Optional[str] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class ActorLog(_message.Message):
    __slots__ = ("request_id", "actor_id", "found", "data", "truncated")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    actor_id: str
    found: bool
    data: bytes
    truncated: bool
    def __init__(self, request_id: _Optional[int] = ..., actor_id: _Optional[str] = ..., found: _Optional[bool] = ..., data: _Optional[bytes] = ..., truncated: _Optional[bool] = ...) -> None: ...

class GetActorLogRequest(_message.Message):
    __slots__ = ("actor_id", "max_bytes")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    max_bytes: int
    def __init__(self, actor_id: _Optional[str] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class GetActorLogResponse(_message.Message):
    __slots__ = ("actor_id", "class_name", "node", "worker_id", "alive", "data", "truncated", "cause")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    class_name: str
    node: str
    worker_id: str
    alive: bool
    data: bytes
    truncated: bool
    cause: str
    def __init__(self, actor_id: _Optional[str] = ..., class_name: _Optional[str] = ..., node: _Optional[str] = ..., worker_id: _Optional[str] = ..., alive: _Optional[bool] = ..., data: _Optional[bytes] = ..., truncated: _Optional[bool] = ..., cause: _Optional[str] = ...) -> None: ...
