"""Public metrics helpers: serve a prometheus-client registry the way actorrt's daemons do.

The daemons serve theirs with ``actorrt start|connect --metrics-port P``. Your own processes
(an RL learner, a driver script) can export more on the same stack::

    from prometheus_client import CollectorRegistry, Counter
    from actorrt.metrics import serve

    registry = CollectorRegistry()
    steps = Counter("myapp_steps", "Steps taken.", registry=registry)
    server = serve(registry, port=9320)        # http://127.0.0.1:9320/metrics
    ...
    server.stop()

``rl.metrics.LearnerMetrics`` is that, for the ``actorrt_rl_*`` metrics of the rl learners.
``METRIC_NAMES`` lists the families the master and the worker daemons export.
"""

from actorrt.common.metrics_http import MetricsServer, serve
from actorrt.master.metrics import MASTER_METRIC_NAMES
from actorrt.transport.stats_pipe import LATENCY_BUCKETS
from actorrt.worker.metrics import WORKER_METRIC_NAMES

# Every family the master and the worker daemons export, as Prometheus names them.
METRIC_NAMES = MASTER_METRIC_NAMES + WORKER_METRIC_NAMES

__all__ = ["LATENCY_BUCKETS", "METRIC_NAMES", "MetricsServer", "serve"]
