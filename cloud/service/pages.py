"""The HTML and JavaScript of the HTTP front door (:mod:`cloud.service.http`): the
dashboard, the live view, the login form, and each session's view as the JSON API's object.
Every client-controlled value is escaped."""

from __future__ import annotations

import dataclasses
import html
import time


def view_fields(view) -> dict:
    """A session's view as the JSON API's object (``dataclasses.asdict`` without its deep
    copy: six times faster on a listing of 100)."""
    return {field.name: getattr(view, field.name) for field in dataclasses.fields(view)}


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def _rung(view) -> str:
    """The rung a session decodes at and its last changes of rung: ``no person_matte
    (compute: no person_matte from frame 40)``; "-" when not decoding and never stepped."""
    last = "; ".join(f"{s.get('cause', '')}: {s.get('rung', '')} from frame {s.get('frame', '')}"
                     for s in view.steps[-3:])  # fmt: skip
    rung = view.rung or "-"
    return f"{rung} ({last})" if last else rung


def dashboard_html(tenant: str, views: list) -> str:
    """The dashboard: one row per session (plain HTML, refreshes every 5 s)."""
    esc = html.escape
    rows = []
    for v in views:
        link = (f'<a href="/sessions/{esc(v.session_id)}">{esc(v.session_id)}</a>'
                if v.live else esc(v.session_id))  # fmt: skip
        level = f"level {v.level}" if v.mode == "generative" else "task"
        rows.append(f"<tr><td>{link}</td><td>{v.width}x{v.height} @ {v.fps:g} fps</td>"
                    f"<td>{esc(v.state)}</td><td>{esc(level)}</td><td>{v.frames_decoded}</td>"
                    f"<td>{v.kbps:.1f}</td><td>{esc(_when(v.last_ack))}</td>"
                    f"<td>{esc(v.decoder or 'detections')}</td>"
                    f"<td>{esc(_rung(v))}</td></tr>")  # fmt: skip
    body = "\n".join(rows) or '<tr><td colspan="9">no sessions</td></tr>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>semcodec: {esc(tenant)}</title></head>
<body><h1>Sessions of {esc(tenant)}</h1>
<table border="1" cellpadding="4" id="sessions">
<tr><th>session</th><th>camera</th><th>state</th><th>level or mode</th><th>frames</th>
<th>kbit/s</th><th>last acknowledgement</th><th>decoder</th><th>rung (steps)</th></tr>
{body}
</table>
<p>JSON: <a href="/api/sessions">/api/sessions</a></p>
</body></html>
"""


def live_html(session_id: str, width: int, height: int) -> str:
    """The live view of a session: MJPEG in an ``img``, boxes on a canvas over it, a rate
    plot (``/live.js`` reads the events)."""
    sid = html.escape(session_id)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>semcodec: {sid}</title></head>
<body data-session="{sid}"><h1>Session {sid}</h1>
<div style="position:relative;display:inline-block">
<img id="video" src="/sessions/{sid}/mjpeg" width="{width}" height="{height}" alt="live video">
<canvas id="boxes" width="{width}" height="{height}"
 style="position:absolute;left:0;top:0"></canvas></div>
<p>frame <span id="frame">-</span>, <span id="count">0</span> boxes,
<span id="kbps">-</span> kbit/s</p>
<canvas id="rate" width="480" height="120" style="border:1px solid #888"></canvas>
<p><a href="/sessions/{sid}/mjpeg">MJPEG</a> · <a href="/sessions/{sid}/frame.jpg">latest
frame</a> · <a href="/sessions/{sid}/events">events</a> · <a href="/">all sessions</a></p>
<script src="/live.js"></script>
</body></html>
"""


LOGIN_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>semcodec: log in</title></head>
<body><form method="post" action="/login"><label>Token
<input type="password" name="token" autocomplete="current-password"></label>
<button type="submit">Log in</button></form></body></html>
"""

LIVE_JS = """// the live view: boxes of each frame over the video, the rate plot
const sid = document.body.dataset.session;
const boxes = document.getElementById("boxes").getContext("2d");
const rate = document.getElementById("rate").getContext("2d");
const history = [];
window.semcodec = {frames: 0, boxesDrawn: 0, lastFrame: 0, latencyMs: []};
function plot() {
  const w = rate.canvas.width, h = rate.canvas.height;
  rate.clearRect(0, 0, w, h);
  const top = Math.max(1, ...history);
  rate.beginPath();
  history.forEach((v, i) => {
    const x = i * w / Math.max(1, history.length - 1), y = h - 4 - v / top * (h - 8);
    if (i) rate.lineTo(x, y); else rate.moveTo(x, y);
  });
  rate.strokeStyle = "#06c"; rate.stroke();
  rate.fillText(top.toFixed(1) + " kbit/s", 4, 12);
}
const events = new EventSource("/sessions/" + sid + "/events");
events.addEventListener("frame", (e) => {
  const d = JSON.parse(e.data);
  boxes.clearRect(0, 0, boxes.canvas.width, boxes.canvas.height);
  boxes.lineWidth = 2; boxes.strokeStyle = "#0f0"; boxes.fillStyle = "#0f0";
  d.boxes.forEach(([x1, y1, x2, y2], i) => {
    boxes.strokeRect(x1, y1, x2 - x1, y2 - y1);
    boxes.fillText("#" + d.ids[i], x1 + 2, y1 + 10);
  });
  document.getElementById("frame").textContent = d.frame;
  document.getElementById("count").textContent = d.boxes.length;
  document.getElementById("kbps").textContent = d.kbps.toFixed(1);
  history.push(d.kbps); if (history.length > 120) history.shift();
  plot();
  window.semcodec.frames += 1; window.semcodec.lastFrame = d.frame;
  window.semcodec.boxesDrawn += d.boxes.length;
  // the edge's timestamp of the frame's unit to now (the same clock on one machine)
  if (d.edge_us > 0) window.semcodec.latencyMs.push(Date.now() - d.edge_us / 1000);
});
"""
