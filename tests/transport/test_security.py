"""The security model: every RPC checks the token; TLS and mutual TLS; version checks; limits."""

from __future__ import annotations

import datetime
import ipaddress
import os
import pickle
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import actorrt
from actorrt.transport import rpc as _rpc
from actorrt.v1 import actor_host_pb2, actor_host_pb2_grpc, common_pb2, master_pb2, master_pb2_grpc
from tests.conftest import ProcCluster


class _CreatesFile:
    """Unpickling this runs code: it creates ``path``. The attack the token check must stop."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@actorrt.remote_class
class Box:
    def __init__(self) -> None:
        self.value = 0

    def put(self, x: object) -> int:
        return len(x) if hasattr(x, "__len__") else 0

    def make(self, nbytes: int) -> np.ndarray:
        return np.zeros(nbytes, dtype=np.uint8)

    def make_bytes(self, nbytes: int) -> bytes:
        return b"z" * nbytes

    def via_child(self, x: object) -> int:
        """An actor as a client: it creates an actor and calls it (over the cluster's TLS)."""
        child = Box.remote().result()
        return child.put(x).result()


def _evil_construct(marker: Path) -> actor_host_pb2.CallBatch:
    spec = common_pb2.Payload(pickle=pickle.dumps(_CreatesFile(str(marker))))
    return actor_host_pb2.CallBatch(
        construct=actor_host_pb2.ConstructActor(version=_rpc.PROTOCOL_VERSION, actor_id="x", spec=spec)
    )


@pytest.mark.parametrize("token", [None, "wrong-token"])
async def test_without_the_token_nothing_is_unpickled_or_run(
    cluster: ProcCluster, tmp_path: Path, token: str | None
) -> None:
    marker = tmp_path / "pwned"
    async with cluster.connect() as c:
        box = await Box.remote()
        endpoint = next(a["endpoint"] for a in (await c.status()).actors if a["actor_id"] == box.actor_id)
        metadata = _rpc.auth_metadata(token)
        async with grpc.aio.insecure_channel(endpoint) as ch:
            call = actor_host_pb2_grpc.ActorHostStub(ch).Calls(metadata=metadata)
            with pytest.raises(grpc.RpcError) as info:
                await call.write(_evil_construct(marker))
                await call.read()
            assert (await call.code()) == grpc.StatusCode.UNAUTHENTICATED or info.value.code() in (
                grpc.StatusCode.UNAUTHENTICATED,
                grpc.StatusCode.INTERNAL,
            )
        async with grpc.aio.insecure_channel(cluster.address) as ch:
            stub = master_pb2_grpc.MasterStub(ch)
            with pytest.raises(grpc.RpcError) as info:
                await stub.GetClusterStatus(master_pb2.GetClusterStatusRequest(), metadata=metadata)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert ("missing token" if token is None else "wrong token") in (info.value.details() or "")
        assert not marker.exists(), "a payload ran without the token"
        assert await box.put([1, 2]) == 2  # the actor and the cluster serve on
        await actorrt.kill(box)


async def test_protocol_version_mismatch_is_refused_with_both_versions(cluster: ProcCluster) -> None:
    metadata = _rpc.auth_metadata(cluster.token)
    async with grpc.aio.insecure_channel(cluster.address) as ch:
        stub = master_pb2_grpc.MasterStub(ch)
        for call, opening in [
            (
                stub.ClientSession(metadata=metadata),
                master_pb2.ClientEvent(open_session=master_pb2.OpenSession(version=99, client_id="old-client")),
            ),
            (
                stub.WorkerSession(metadata=metadata),
                master_pb2.WorkerEvent(register_worker=master_pb2.RegisterWorker(version=99, node="old", cpus=1)),
            ),
        ]:
            await call.write(opening)
            with pytest.raises(grpc.RpcError) as info:
                await call.read()
            assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            details = info.value.details() or ""
            assert "v99" in details and f"v{_rpc.PROTOCOL_VERSION}" in details
    assert len(cluster.status()["nodes"]) == 2  # the master serves on


async def test_payload_over_the_limit_fails_that_call_alone(cluster: ProcCluster) -> None:
    async with cluster.connect(max_payload_mb=1):
        box = await Box.remote()
        with pytest.raises(
            actorrt.SerializationError, match=r"arguments of Box.put are 2.0 MiB, over the limit of 1.0 MiB"
        ):
            box.put(np.zeros(2 * 2**20, dtype=np.uint8))
        with pytest.raises(actorrt.RemoteError, match=r"return value of Box.make is 2.0 MiB, over the limit"):
            await box.make(2 * 2**20)
        assert await box.put(np.zeros(1000, dtype=np.uint8)) == 1000  # smaller calls go on
        assert (await box.make(1000)).nbytes == 1000
        await actorrt.kill(box)


async def test_a_value_pickled_in_band_over_2_gib_fails_that_call_alone(cluster: ProcCluster) -> None:
    # protobuf encodes no message of 2 GiB or more: such arguments used to fail with "Failed to
    # serialize proto", and such a return value broke the actor's connection (the actor was lost).
    # Real sizes: ~6 GiB of memory for a few seconds.
    async with cluster.connect(max_payload_mb=4096):
        box = await Box.remote()
        with pytest.raises(actorrt.SerializationError, match=r"arguments of Box.put are 2048.0 MiB pickled in band"):
            box.put(b"x" * 2**31)
        with pytest.raises(actorrt.RemoteError, match=r"return value of Box.make_bytes is 2048.0 MiB pickled in band"):
            await box.make_bytes(2**31)
        assert await box.put(b"x" * 1000) == 1000  # the actor and its connection go on
        assert len(await box.make_bytes(1000)) == 1000
        await actorrt.kill(box)


# ---- TLS ------------------------------------------------------------------------------------


def _write_pem(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    path.chmod(0o600)
    return str(path)


def _issue(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey | None,
    ca: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return builder.sign(issuer_key or key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


def make_pki(d: Path) -> dict[str, str]:
    """A CA, a node certificate for 127.0.0.1, a client certificate, and a stranger's, as PEM
    files in ``d``: their paths by name."""
    d.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}

    def key_pem(k: ec.EllipticCurvePrivateKey) -> bytes:
        return k.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue("actorrt test CA", ca_key, None, None, ca=True)
    out["ca"] = _write_pem(d / "ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    for name in ("node", "client"):
        k = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(name, k, ca, ca_key)
        out[name] = _write_pem(d / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM))
        out[f"{name}_key"] = _write_pem(d / f"{name}.key", key_pem(k))
    stranger_key = ec.generate_private_key(ec.SECP256R1())
    stranger = _issue("stranger", stranger_key, None, None)  # self-signed, not by our CA
    out["stranger"] = _write_pem(d / "stranger.pem", stranger.public_bytes(serialization.Encoding.PEM))
    out["stranger_key"] = _write_pem(d / "stranger.key", key_pem(stranger_key))
    return out


def start_mutual_tls(home: Path, pki: dict[str, str], cpus_per_worker: int = 1, **kwargs: Any) -> ProcCluster:
    """One master and one worker serving mutual TLS with the node certificate of ``pki``."""
    node = ("--tls-cert", pki["node"], "--tls-key", pki["node_key"], "--tls-ca", pki["ca"])
    return ProcCluster(home).start(
        workers=1, cpus_per_worker=cpus_per_worker, master_args=node, worker_args=node, **kwargs
    )


def mutual_tls_client(pki: dict[str, str]) -> dict[str, Any]:
    """``actorrt.connect`` arguments of a client certified by ``pki``'s CA."""
    return {"tls_ca": pki["ca"], "tls_cert": pki["client"], "tls_key": pki["client_key"]}


@pytest.fixture
def tls_cluster(tmp_path: Path, pki: dict[str, str]) -> Iterator[ProcCluster]:
    status = ("--tls-ca", pki["ca"], "--tls-cert", pki["client"], "--tls-key", pki["client_key"])
    c = start_mutual_tls(tmp_path / "home", pki, status_args=status)
    yield c
    c.stop()


async def test_server_tls_only_for_clients_that_verify_it(tmp_path: Path, pki: dict[str, str]) -> None:
    """Server TLS (no client certificates): one certificate, verified against the CA."""
    node = ("--tls-cert", pki["node"], "--tls-key", pki["node_key"])
    c = ProcCluster(tmp_path / "home").start(
        workers=1, cpus_per_worker=1, master_args=node, worker_args=(*node,), status_args=("--tls-ca", pki["ca"])
    )
    try:
        assert len(c.status()["nodes"]) == 1
        async with actorrt.connect(c.address, token=c.token, tls_ca=pki["ca"]):
            box = await Box.remote()
            assert await box.put([1]) == 1
            await actorrt.kill(box)
        with pytest.raises(actorrt.ClusterConnectionError):  # plaintext is not served
            async with actorrt.connect(c.address, token=c.token, timeout=3):
                pass
    finally:
        c.stop()


async def test_mutual_tls_serves_only_certified_clients(tls_cluster: ProcCluster, pki: dict[str, str]) -> None:
    async with actorrt.connect(tls_cluster.address, token=tls_cluster.token, **mutual_tls_client(pki)) as c:
        box = await Box.remote()  # master and actor host both over mutual TLS
        assert await box.put(np.zeros(10)) == 10
        assert (await c.status()).slots_used == 1
        await actorrt.kill(box)
    refusals: list[dict[str, Any]] = [
        {"tls_ca": pki["ca"]},  # no client certificate
        {"tls_ca": pki["ca"], "tls_cert": pki["stranger"], "tls_key": pki["stranger_key"]},  # not our CA
        {},  # plaintext
    ]
    for refused in refusals:
        with pytest.raises(actorrt.ClusterConnectionError):
            async with actorrt.connect(tls_cluster.address, token=tls_cluster.token, timeout=3, **refused):
                pass
    assert len(tls_cluster.status()["nodes"]) == 1  # the cluster serves on


async def test_actors_reach_their_cluster_over_mutual_tls(tmp_path: Path, pki: dict[str, str]) -> None:
    c = start_mutual_tls(tmp_path / "home", pki, cpus_per_worker=2)
    try:
        async with actorrt.connect(c.address, token=c.token, **mutual_tls_client(pki)):
            parent = await Box.remote()
            assert await parent.via_child([1, 2, 3]) == 3
            await actorrt.kill(parent)
    finally:
        c.stop()


def test_tls_flags_are_checked(fresh_home: Path) -> None:
    from tests.conftest import actorrt_cli

    out = actorrt_cli("start", "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key")
    assert out.returncode == 1 and "TLS cert file not found: /nonexistent.pem" in out.stderr
    out = actorrt_cli("start", "--tls-cert", __file__)
    assert out.returncode == 1 and "both a certificate and its key" in out.stderr


class _TokenTrap(grpc.ServerInterceptor):
    """A gRPC server on a port of its own that records the token of every RPC it gets (and
    answers none): what a stranger's server on a port a mistyped address wraps to would see."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.server = grpc.server(ThreadPoolExecutor(2), interceptors=[self])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        for key, value in details.invocation_metadata:
            if key == _rpc.AUTH_KEY:
                self.tokens.append(value.decode() if isinstance(value, bytes) else value)
        return None  # UNIMPLEMENTED


def test_an_address_with_a_port_over_65535_is_refused_before_the_token_leaves(
    fresh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gRPC reads a port modulo 65536: ``actorrt.connect("host:P+65536")``, ``parl.connect``
    and ``ACTORRT_ADDRESS`` (for them and for the CLI) dialled port P, and whatever listened
    there got the cluster token. Only the CLI's ``--address`` refused such ports. Every entry
    point checks the address with one function (``addresses.check_address``), before it dials."""
    from actorrt.compat import parl
    from tests.conftest import actorrt_cli

    trap = _TokenTrap()
    try:
        p = trap.port
        with pytest.raises(
            actorrt.ClusterConnectionError, match="UNIMPLEMENTED"
        ):  # the trap works: a good address reaches it
            with actorrt.connect(f"127.0.0.1:{p}", token="secret-0", timeout=5):
                pass
        assert set(trap.tokens) == {"Bearer secret-0"}  # once or twice: the session may be tried again
        trap.tokens.clear()
        bad = [f"127.0.0.1:{p + 65536}", "127.0.0.1:-1", f"127.0.0.1: {p}", "127.0.0.1:0", f":{p}", f"::1:{p}"]
        bad += [f"127.0.0.1:{p}x", "127.0.0.1:\u00b2", f"dns:///127.0.0.1:{p}", f"[::1:{p}", f"127.0.0.1 x:{p}"]
        for address in bad:
            with pytest.raises(ValueError, match=r"connect: address must be HOST:PORT .*got '"):
                with actorrt.connect(address, token="secret-1", timeout=3):
                    pass
            with pytest.raises(ValueError, match=r"connect: master_address must be HOST:PORT .*got '"):
                parl.connect(address, token="secret-2")
            monkeypatch.setenv("ACTORRT_ADDRESS", address)
            with pytest.raises(ValueError, match=r"ACTORRT_ADDRESS must be HOST:PORT .*got '"):
                with actorrt.connect(token="secret-3", timeout=3):
                    pass
            monkeypatch.delenv("ACTORRT_ADDRESS")
        wrapped = f"127.0.0.1:{p + 65536}"
        out = actorrt_cli("status", "--address", wrapped, "--token", "secret-4", "--timeout", "5")
        assert out.returncode == 2 and "--address: HOST:PORT with a port in 1..65535" in out.stderr, out.stderr
        env = dict(os.environ, ACTORRT_ADDRESS=wrapped)
        out = actorrt_cli("status", "--token", "secret-5", "--timeout", "5", env=env)
        assert out.returncode == 1 and "actorrt status: ACTORRT_ADDRESS must be HOST:PORT" in out.stderr, out.stderr
        assert len(out.stderr.splitlines()) == 1, out.stderr
        assert trap.tokens == [], "a token went to the port the address wrapped to"
        for good in ("localhost:8010", "[::1]:8010", "node-7.example.org:65535", "10.0.0.1:1"):
            assert actorrt.connect(good).address == good  # accepted (nothing dialled until it is entered)
    finally:
        trap.server.stop(None)
