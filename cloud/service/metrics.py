"""Prometheus metrics of ``cloud-decoder serve``, in a registry of the server's own (never
the process-global one, so several servers in one process do not collide)."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from semcodec.cloud.service.messages import Metrics

#: Decode latency buckets, seconds per frame (reconstruction and outputs included).
DECODE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Viewer latency buckets, seconds (measured at the next frame: a frame period's resolution).
VIEWER_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)


class PrometheusMetrics(Metrics):
    """Sessions, bytes, units, decode latency, errors and backlog; the decoders by name and
    rung, their steps and compute; the process's memory, CPU and open files
    (``process_*``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        ProcessCollector(registry=reg)  # process_resident_memory_bytes, cpu, open fds
        self.opened = Counter("semcodec_sessions_opened", "Sessions opened or resumed",
                              ["resumed"], registry=reg)  # fmt: skip
        self.closed = Counter("semcodec_sessions_closed", "Sessions closed, by final state",
                              ["state"], registry=reg)  # fmt: skip
        self.active = Gauge("semcodec_sessions_active", "Sessions held open", registry=reg)
        self.units = Counter("semcodec_units_stored", "Units stored (acknowledged)",
                             registry=reg)  # fmt: skip
        self.bytes = Counter("semcodec_unit_bytes_stored", "Unit bytes stored, framing "
                             "included", registry=reg)  # fmt: skip
        self.decode = Histogram("semcodec_decode_seconds", "Seconds to decode, reconstruct "
                                "and write one frame", buckets=DECODE_BUCKETS,
                                registry=reg)  # fmt: skip
        self.errors = Counter("semcodec_errors", "Refused requests and failed decodes, by "
                              "status", ["code"], registry=reg)  # fmt: skip
        self.backlog = Gauge("semcodec_backlog_units", "Units stored but not yet decoded, all "
                             "sessions", registry=reg)  # fmt: skip
        self.throttled_s = Counter("semcodec_throttled_seconds", "Seconds streams were held "
                                   "back by the per-session rate limit", registry=reg)  # fmt: skip
        self.viewers = Gauge("semcodec_viewers_active", "Live viewers (MJPEG or events) of "
                             "the HTTP front door", registry=reg)  # fmt: skip
        self.viewers_dropped = Counter("semcodec_viewers_dropped", "Live viewers dropped for "
                                       "not reading (--viewer-stall-s)", registry=reg)
        self.viewer_latency = Histogram("semcodec_viewer_latency_seconds", "Seconds from a "
                                        "live frame's publication to a viewer's machine "
                                        "taking it (acknowledged), measured at the next frame",
                                        buckets=VIEWER_BUCKETS, registry=reg)  # fmt: skip
        self.detect_frames = Counter("semcodec_detect_frames", "Detect-mode frames decoded, by "
                                     "the rate status the edge's unit carried (ok; "
                                     "over_budget: its budget cannot reach the agreement floor; "
                                     "below_floor: no setting reaches it)", ["status"],
                                     registry=reg)  # fmt: skip
        self.detect_unheld_streams = Gauge("semcodec_detect_streams_unheld", "Detect-mode "
                                           "sessions whose edge says, at its last decoded unit, "
                                           "that its budget cannot reach the agreement floor",
                                           registry=reg)  # fmt: skip
        self.decoder_steps = Counter("semcodec_decoder_steps", "Changes of a session "
                                     "decoder's rung, by direction (down, up) and cause (pace: "
                                     "behind its camera or caught up; compute: its tenant over "
                                     "or under its compute limit)", ["direction", "cause"],
                                     registry=reg)  # fmt: skip
        self.decoder_gflops = Gauge("semcodec_decoder_gflops", "Decoder compute of the held "
                                    "sessions, GFLOP/s (metered from what their decoders ran)",
                                    registry=reg)  # fmt: skip
        self._http = None

    def bind_front(self, front) -> None:
        """Reads the HTTP front door (a :class:`~cloud.service.http.FrontDoor`) at each
        scrape: its live viewers, connections and refusals; counts the viewers it drops."""
        viewers = front.viewers
        self.viewers.set_function(lambda: sum(viewers.held.values()))
        viewers.on_drop = self.viewers_dropped.inc
        viewers.on_taken = self.viewer_latency.observe
        self.registry.register(FrontDoorCollector(front))

    def bind(self, manager) -> None:
        """Reads the live gauges from ``manager`` (a SessionManager) at each scrape."""
        self.active.set_function(lambda: manager.active)
        self.backlog.set_function(manager.total_backlog)
        self.decoder_gflops.set_function(lambda: manager.decoder_flops() / 1e9)
        self.registry.register(DecoderCensus(manager))

    def session_opened(self, resumed: bool) -> None:
        self.opened.labels(resumed=str(resumed).lower()).inc()

    def session_closed(self, state: str) -> None:
        self.closed.labels(state=state).inc()

    def unit_stored(self, nbytes: int) -> None:
        self.units.inc()
        self.bytes.inc(nbytes)

    def frame_decoded(self, seconds: float) -> None:
        self.decode.observe(seconds)

    def error(self, code: str) -> None:
        self.errors.labels(code=code).inc()

    def throttled(self, seconds: float) -> None:
        self.throttled_s.inc(seconds)

    def detect_frame(self, status: str) -> None:
        self.detect_frames.labels(status=status).inc()

    def detect_unheld(self, delta: int) -> None:
        self.detect_unheld_streams.inc(delta)

    def decoder_stepped(self, down: bool, cause: str) -> None:
        self.decoder_steps.labels(direction="down" if down else "up", cause=cause).inc()

    def serve(self, host: str, port: int) -> int:
        """Serves ``/metrics`` over HTTP; returns the port (``port`` 0: a free one)."""
        self._http, _thread = start_http_server(port, addr=host, registry=self.registry)
        return self._http.server_address[1]

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None


class FrontDoorCollector:
    """The HTTP front door's connections and refusals, read at each scrape:
    ``semcodec_http_connections_open``, ``semcodec_http_connections_refused_total`` (over a
    cap), ``semcodec_http_connections_timed_out_total`` (no request head in time),
    ``semcodec_http_connections_evicted_total`` (no request head yet, closed to make room
    at the cap), ``semcodec_http_requests_waiting`` (held for their tenant's turn) and
    ``semcodec_http_refused_total{reason}``: ``unauthenticated`` (401 without a known
    token), ``login_failed``, ``login_rate``, ``cross_site``, ``tenant_rate``, ``misdirected``
    (421) and ``malformed`` (refused by the parser)."""

    def __init__(self, front) -> None:
        self.front = front

    def describe(self):
        return list(self._families())

    def _families(self):
        return (GaugeMetricFamily("semcodec_http_connections_open", "Open connections of the "
                                  "HTTP front door"),
                CounterMetricFamily("semcodec_http_connections_refused", "HTTP connections "
                                    "refused over a cap (503)"),
                CounterMetricFamily("semcodec_http_connections_timed_out", "HTTP connections "
                                    "closed for sending no request head in time"),
                CounterMetricFamily("semcodec_http_connections_evicted", "HTTP connections "
                                    "without a request head closed, the oldest first, to make "
                                    "room for a new one at the cap"),
                GaugeMetricFamily("semcodec_http_requests_waiting", "HTTP requests held for "
                                  "their tenant's turn (http_tenant_rps)"),
                CounterMetricFamily("semcodec_http_refused", "HTTP requests refused, by "
                                    "reason", labels=["reason"]))  # fmt: skip

    def collect(self):
        front = self.front
        gate = front.gate
        opened, refused, timed_out, evicted, waiting, reasons = self._families()
        opened.add_metric([], gate.open)
        refused.add_metric([], gate.refused.total)
        timed_out.add_metric([], gate.timed_out)
        evicted.add_metric([], gate.evicted)
        waiting.add_metric([], front.tenant_paces.held)
        counts = {**front.refusals.counts, "malformed": front.server_log.malformed.total}
        for reason, count in sorted(counts.items()):
            reasons.add_metric([reason], count)
        yield from (opened, refused, timed_out, evicted, waiting, reasons)


class DecoderCensus:
    """``semcodec_decoder_sessions{decoder, rung}``: held sessions whose decoder is open, by
    reconstructor name and the rung of its ladder they decode at (read at each scrape)."""

    def __init__(self, manager) -> None:
        self.manager = manager

    def describe(self):
        return [GaugeMetricFamily("semcodec_decoder_sessions", "Sessions decoding, by decoder "
                                  "and rung", labels=["decoder", "rung"])]  # fmt: skip

    def collect(self):
        family = self.describe()[0]
        for (decoder, rung), count in sorted(self.manager.decoder_census().items()):
            family.add_metric([decoder, rung], count)
        yield family
