"""deploy/: the Grafana dashboard against what a running cluster exports, the Prometheus
config, the Kubernetes manifests and the Dockerfile."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import actorrt
from actorrt.cli.main import build_parser
from rl.metrics import RL_METRIC_NAMES, RL_METRICS
from tests.obs_helpers import MetricsCluster, scrape_all

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

# PromQL words that are not metric names.
_PROMQL_WORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "inf",
    "nan",
    "le",
}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (a small PromQL reader, enough for dashboards)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # groupings
    text = re.sub(r"\$\{?\w+\}?", "", text)  # Grafana variables
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = m.group(0)
        following = text[m.end() :].lstrip()
        if following.startswith("(") or word.lower() in _PROMQL_WORDS:
            continue  # a function or aggregation, or a keyword
        if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
            continue  # the exponent of a number like 1e3
        names.add(word)
    return names


def test_promql_reader() -> None:
    expr = 'histogram_quantile(0.99, sum by (class, le) (rate(actorrt_call_latency_seconds_bucket{class="A"}[$__rate_interval])))'
    assert promql_metric_names(expr) == {"actorrt_call_latency_seconds_bucket"}
    assert promql_metric_names("sum(a_total) / sum without (x) (b)") == {"a_total", "b"}


def _dashboard_exprs() -> list[str]:
    dash = json.loads((DEPLOY / "grafana" / "actorrt.json").read_text())
    exprs: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            exprs.extend(t["expr"] for t in p.get("targets", []) if t.get("expr"))
            walk(p.get("panels", []))

    walk(dash["panels"])
    return exprs


def _rl_exported() -> set[str]:
    """What the rl learners export (rl.metrics), as sample names."""
    names = set()
    for m in RL_METRICS:
        names.add(m.name)
        if m.kind == "histogram":
            names |= {m.name + "_bucket", m.name + "_sum", m.name + "_count"}
    return names


@actorrt.remote_class
class Echo:
    def echo(self, x: Any) -> Any:
        return x

    def fail(self) -> None:
        raise RuntimeError("boom")


@pytest.fixture(scope="module")
def metrics_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsCluster]:
    c = MetricsCluster(tmp_path_factory.mktemp("actorrt-dash")).start()
    try:
        yield c
    finally:
        c.stop()


async def test_every_dashboard_expression_uses_exported_metrics(metrics_cluster: MetricsCluster) -> None:
    exprs = _dashboard_exprs()
    assert len(exprs) >= 20
    async with metrics_cluster.connect():
        a = await Echo.remote()
        await asyncio.gather(*[a.echo(i) for i in range(20)])
        with pytest.raises(RuntimeError):
            await a.fail()
        await asyncio.sleep(1.5)  # hosts report their call statistics about once a second
        exported = set(await asyncio.to_thread(scrape_all, metrics_cluster.metrics_targets))
        await actorrt.kill(a)
    exported |= _rl_exported()
    missing = {e: sorted(promql_metric_names(e) - exported) for e in exprs if promql_metric_names(e) - exported}
    assert not missing, f"dashboard expressions use metrics nothing exports: {missing}"
    used = set().union(*(promql_metric_names(e) for e in exprs))
    assert {n for n in RL_METRIC_NAMES if n not in {"actorrt_rl_weight_broadcast_seconds"}} <= used
    assert "actorrt_rl_weight_broadcast_seconds_bucket" in used


def test_dashboard_has_the_promised_panels() -> None:
    dash = json.loads((DEPLOY / "grafana" / "actorrt.json").read_text())
    rows = [p["title"] for p in dash["panels"] if p["type"] == "row"]
    assert rows == ["Cluster overview", "Nodes and slots", "Calls", "Actor resources and deaths", "RL training"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert any(v["type"] == "datasource" for v in dash["templating"]["list"])


def test_prometheus_config_scrapes_the_daemons() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert set(jobs) == {"actorrt", "actorrt-rl"}
    targets = [t for sc in jobs["actorrt"]["static_configs"] for t in sc["targets"]]
    assert targets == ["127.0.0.1:9310", "127.0.0.1:9311"]


def _k8s_docs() -> list[dict[str, Any]]:
    docs = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                doc["_file"] = path.name
                docs.append(doc)
    return docs


def _pod_container(doc: dict[str, Any]) -> dict[str, Any]:
    containers = doc["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_kubernetes_manifests_fit_together() -> None:
    docs = _k8s_docs()
    for doc in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), doc["_file"]
    kinds = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    secret = kinds[("Secret", "actorrt-token")]
    master = kinds[("Deployment", "actorrt-master")]
    service = kinds[("Service", "actorrt-master")]
    worker = kinds.get(("Deployment", "actorrt-worker")) or kinds[("DaemonSet", "actorrt-worker")]
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in (DEPLOY / "k8s").glob("*.yaml") if p.name != "kustomization.yaml"
    )

    parser = build_parser()
    for deployment in (master, worker):
        tmpl = deployment["spec"]["template"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= tmpl["metadata"]["labels"].items()
        container = _pod_container(deployment)
        env = {e["name"]: e for e in container["env"]}
        ref = env["ACTORRT_TOKEN"]["valueFrom"]["secretKeyRef"]
        assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"]
        args = [a.replace("$(POD_IP)", "10.0.0.7") for a in container["args"]]
        for var in re.findall(r"\$\((\w+)\)", " ".join(container["args"])):
            assert var in env, f"{var} is used in args but not defined"
        parsed = parser.parse_args(args)  # the real CLI accepts them
        assert parsed.block and parsed.metrics_port > 0
        annotations = tmpl["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert int(annotations["prometheus.io/port"]) == parsed.metrics_port
        assert parsed.metrics_host == "0.0.0.0"
        ports = {p["containerPort"] for p in container["ports"]}
        assert parsed.metrics_port in ports
        assert container["image"] == _pod_container(master)["image"]

    margs = build_parser().parse_args(_pod_container(master)["args"])
    assert margs.command == "start" and margs.host == "0.0.0.0" and margs.cpus == 0
    assert margs.keep_workers  # a master pod moved by Kubernetes leaves the workers' actors alive
    assert service["spec"]["selector"].items() <= master["spec"]["template"]["metadata"]["labels"].items()
    grpc_port = next(p for p in service["spec"]["ports"] if p["name"] == "grpc")
    assert grpc_port["port"] == margs.port
    wargs = build_parser().parse_args([a.replace("$(POD_IP)", "10.0.0.7") for a in _pod_container(worker)["args"]])
    assert wargs.command == "connect"
    assert wargs.address == f"{service['metadata']['name']}:{grpc_port['port']}"
    assert wargs.node_ip == "10.0.0.7"
    pod_ip = {e["name"]: e for e in _pod_container(worker)["env"]}["POD_IP"]
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"

    scrape = kinds[("ConfigMap", "actorrt-prometheus-scrape")]
    inner = yaml.safe_load(scrape["data"]["actorrt-scrape.yml"])
    assert inner["scrape_configs"][0]["kubernetes_sd_configs"] == [{"role": "pod"}]


def test_dockerfile_builds_one_cpu_image_with_the_cli_as_entrypoint() -> None:
    text = (DEPLOY / "docker" / "Dockerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    torch = next(ln for ln in lines if "torch" in ln)
    assert shlex.split(torch)[1:] == [
        "pip",
        "install",
        "torch==2.13.0",
        "--index-url",
        "https://download.pytorch.org/whl/cpu",
    ]
    install = next(i for i, ln in enumerate(lines) if ln.startswith("RUN pip install ."))
    assert install > lines.index(torch), "torch must be installed before the package"
    for src in re.findall(r"^COPY (.+) \./", text, re.M):
        for name in src.split():
            assert (ROOT / name).exists(), f"COPY {name}: no such path in the repo"
    assert json.loads(next(ln for ln in lines if ln.startswith("ENTRYPOINT")).split(None, 1)[1]) == ["actorrt"]
    assert ".venv" in (ROOT / ".dockerignore").read_text().split()
