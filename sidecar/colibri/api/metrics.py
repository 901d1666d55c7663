"""GET /metrics: Prometheus text exposition (0.0.4) of the scheduler, names as
docs/dashboard-feeds.md#metrics has them.

Gauges and counters are read from the scheduler at collection time (so they
can never drift from /health); the four histograms are observed as things
happen. One registry per app: two servers in one process never share series.
"""
from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from colibri.serving.scheduler import Scheduler

PREFIX = "colibri_scheduler_"
BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
disable_created_metrics()  # the documented series have no _created twins
HISTOGRAMS = {
    "queue_wait": "Wait until admission, for admitted requests only",
    "slot_duration": "Slot occupancy until completion, failure, or cancellation",
    "first_output": "Engine-call start to first nonempty text output",
    "engine_call": "Duration of each finished engine generation call, including failure/cancellation",
}


class SchedulerCollector:
    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler

    def collect(self):
        s = self.scheduler
        for name, value, text in (("active", s.active, "Admitted requests"), ("queued", s.queued, "Waiters"),
                                  ("capacity", s.capacity, "KV slot capacity"),
                                  ("max_queue", s.max_queue, "Queue limit")):
            yield GaugeMetricFamily(PREFIX + name, text, value=value)
        c = s.counters
        for name, value, text in (
                ("admitted", c.admitted, "Requests admitted to a KV slot"),
                ("completed", c.completed, "Admitted requests that returned normally"),
                ("failed", c.failed, "Admitted requests that raised an error, excluding client cancellation"),
                ("rejected", c.rejected, "Queue-full refusals"),
                ("timed_out", c.timed_out, "Queue timeouts"),
                ("cancelled", c.cancelled, "Cancellations before admission or during admitted work")):
            yield CounterMetricFamily(PREFIX + name, text, value=value)


class UpstreamCollector:
    """Each upstream's state, load and circuit breaker, read at collection time (`coli serve --upstream`)."""

    def __init__(self, upstreams):
        self.upstreams = upstreams

    def collect(self):
        from colibri.serving.breaker import CLOSED, HALF_OPEN, KINDS, OPEN

        up = GaugeMetricFamily("colibri_upstream_up", "1 while requests may go to the upstream (its breaker closed "
                                                      "or half-open)", labels=["upstream"])
        busy = GaugeMetricFamily("colibri_upstream_in_flight", "Requests the upstream is running", labels=["upstream"])
        state = GaugeMetricFamily("colibri_upstream_breaker_state", "1 for the breaker's state: closed, open "
                                                                    "or half_open", labels=["upstream", "state"])
        failing = GaugeMetricFamily("colibri_upstream_breaker_failures", "Failures in a row, of requests or of "
                                                                         "health probes", labels=["upstream", "of"])
        probe = GaugeMetricFamily("colibri_upstream_breaker_next_probe_seconds", "Seconds until the next health "
                                                                                 "probe", labels=["upstream"])
        opened = CounterMetricFamily("colibri_upstream_breaker_opened", "Times the breaker opened, by the kind of "
                                                                        "failure that opened it",
                                     labels=["upstream", "reason"])
        for u in self.upstreams.all:
            b = u.breaker
            up.add_metric([u.url], 1 if u.healthy else 0)
            busy.add_metric([u.url], u.in_flight)
            for name in (CLOSED, OPEN, HALF_OPEN):
                state.add_metric([u.url, name], 1 if b.state == name else 0)
            failing.add_metric([u.url, "requests"], b.failed_requests)
            failing.add_metric([u.url, "probes"], b.failed_probes)
            probe.add_metric([u.url], b.next_probe_in_s())
            for kind in KINDS:
                opened.add_metric([u.url, kind], b.opened[kind])
        yield from (up, busy, state, failing, probe, opened)


class Metrics:
    """The registry, and the scheduler's Observer for the histograms."""

    def __init__(self, scheduler: Scheduler):
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(SchedulerCollector(scheduler))
        self.histograms = {name: Histogram(PREFIX + name + "_seconds", text, buckets=BUCKETS, registry=self.registry)
                           for name, text in HISTOGRAMS.items()}

    def add_upstreams(self, upstreams):
        """The per-upstream series: latency, time to first output, errors by kind (and, read live, up / in flight)."""
        from colibri.serving.upstream import UpstreamSeries

        self.registry.register(UpstreamCollector(upstreams))
        return UpstreamSeries(
            latency=Histogram("colibri_upstream_request_seconds", "Duration of each forwarded request",
                              ["upstream"], buckets=BUCKETS, registry=self.registry),
            first_byte=Histogram("colibri_upstream_first_output_seconds", "Forwarded request start to first text",
                                 ["upstream"], buckets=BUCKETS, registry=self.registry),
            errors=Counter("colibri_upstream_errors", "Upstream errors: connect, timeout, stream (mid-reply), "
                                                      "probe (on its breaker), status (a 5xx answer: not on it)",
                           ["upstream", "kind"], registry=self.registry))

    def observe(self, name: str, seconds: float) -> None:
        self.histograms[name].observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


metrics_key = web.AppKey("metrics", Metrics)  # here, not in keys.py: keys.py imports this module


async def get_metrics(request: web.Request) -> web.Response:
    return web.Response(body=request.app[metrics_key].exposition(), headers={"Content-Type": CONTENT_TYPE})
