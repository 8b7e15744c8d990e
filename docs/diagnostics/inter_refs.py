"""Issue 51, Deliver 3: what inter-coded reference refreshes save against whole thumbnails.

    python docs/diagnostics/inter_refs.py [CLIP ...] [--json OUT]
        CLIP: pets (PETS09-S2L1-full 501-560), tud (TUD-Stadtmitte 91-179), pets-long
        (501-795), tud-long (1-179); default pets tud. Needs ../shared/data.

Per clip, a level-1 encode at its defaults (target 0.004 BPP) with inter-coded references
(``appearance_inter``) records every refresh it sends (a person's reference replacing one
of the same shape: what may be inter-coded) with the reference the decoder held then, and
codes each one again every way at several qualities:

- ``intra``: a whole WebP (quality 5..70), what every reference was before;
- ``hevc-p``: the shipped inter coding (:mod:`codec.scaffold.interref`, QP 26..46);
- ``x264-p``: the same two-picture scheme with libx264 (4:2:0, psy off), an alternative;
- ``webp-res``: a WebP of the residual against the resized previous reference, offset by
  128 (quality 5..70), an alternative.

Quality is the reference's against the frame's crop it was made from (the person's region
as sent): PSNR (RGB, dB) and ST-LPIPS (``evaluation.metrics.perceptual``; both pictures
enlarged by pixel repetition to at least 32 pixels a side, the network's minimum is 21).
Bytes are the payload's (an entry's code, its size for inter, the coded bytes). Printed:
each way's total bytes and mean quality per setting, its BD-rate against ``intra``
(``bjontegaard``, pchip), and the encoder's own choice at equal quality (the WebP at the
stream's quality against the cheapest ``hevc-p`` of at least its PSNR). Then the whole
streams with and without inter refreshes: references' bytes, ``ref_share``,
``ref_bytes_per_person_s`` (``evaluation.codecs.scaffold.reference_costs``), the refreshes
coded each way and the stream's bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from fractions import Fraction

import av
import cv2
import numpy as np

from semcodec.codec.core.yuv import i420_to_rgb, rgb_to_i420
from semcodec.codec.scaffold import appearance as A
from semcodec.codec.scaffold import interref as I
from semcodec.codec.scaffold.codec import encode_frames
from semcodec.codec.scaffold.levels import level_config
from semcodec.evaluation.codecs.scaffold import reference_costs
from semcodec.evaluation.data.sequences import load_sequence

CLIPS = {"pets": ("PETS09-S2L1-full", 501, 60), "tud": ("TUD-Stadtmitte", 91, 89),
         "pets-long": ("PETS09-S2L1-full", 501, 295), "tud-long": ("TUD-Stadtmitte", 1, 179)}
WEBP_QUALITIES = (5, 10, 20, 30, 50, 70)
QPS = (26, 30, 34, 38, 42, 46)


# ----------------------------------------------------------------------------- the refreshes

def record_refreshes(frames: np.ndarray, fps: float, inter: bool) -> tuple[list, dict]:
    """Encodes ``frames`` at level 1; returns the refreshes sent (dicts: ``held`` the
    decoder's previous reference, ``crop`` the frame's crop coded, ``quality`` the WebP
    quality) and the stream's figures."""
    log: list[dict] = []
    original = A.AppearanceSelector.select
    selectors = []

    def select(self, frame, number, tracks, *args, **kwargs):
        before = {t: (r.picture, r.aspect) for t, r in self._refs.items()}
        chosen = original(self, frame, number, tracks, *args, **kwargs)
        self.sent = getattr(self, "sent", 0) + len(chosen)
        boxes = dict(zip(tracks.ids.tolist(), tracks.boxes, strict=True))
        for tid in chosen:
            if tid not in before:
                continue
            change = abs(np.log(A._aspect(boxes[tid]) / before[tid][1]))
            if change > np.log(1 + A.MAX_ASPECT_CHANGE):
                continue  # another shape: coded whole
            pic = self._refs[tid].picture
            crop = A.crop_box(frame, A.ref_region(boxes[tid]), (pic.shape[1], pic.shape[0]))
            log.append({"held": before[tid][0], "crop": crop, "quality": self.quality,
                        "sent": len(chosen[tid])})
        if self not in selectors:
            selectors.append(self)
        return chosen

    A.AppearanceSelector.select = select
    try:
        start = time.time()
        size = (frames.shape[2], frames.shape[1])
        config = level_config(1, appearance_inter=inter, appearance_plate=inter)
        header, units, _ = encode_frames(list(frames), config, fps, size, len(frames))
        seconds = time.time() - start
    finally:
        A.AppearanceSelector.select = original
    figures = stream_figures(header, units, fps, selectors[0], seconds)
    figures["refreshes"] = len(log)  # of a person's reference by one of the same shape
    figures["references"] = selectors[0].sent
    return log, figures


def stream_figures(header, units, fps: float, selector, seconds: float) -> dict:
    """The stream's reference costs (``reference_costs`` over the boxes it carries)."""
    from semcodec.codec.scaffold.codec import unit_stream_bytes
    from semcodec.codec.scaffold.decoder import ScaffoldDecoder

    decoder = ScaffoldDecoder(header)
    boxes = []
    for unit in units:
        decoded = decoder.decode_unit(unit)
        if decoded is not None:
            boxes.append(decoded.scaffold.tracks.boxes)
    refs = sum(unit_stream_bytes(u).get("appearance", 0) for u in units[:-1])
    return {"stream_bytes": len(header.to_bytes()) + sum(len(u.to_bytes()) for u in units),
            "reference_bytes": refs, **reference_costs(units, boxes, fps),
            "inter_refreshes": selector.inter_refreshes,
            "intra_refreshes": selector.intra_refreshes, "encode_s": round(seconds, 1)}


# ----------------------------------------------------------------------------- the coders

def intra(held, crop, quality):
    data = A.encode_ref(crop, quality)
    return 1 + len(data), A.decode_ref(data)


def hevc_p(held, crop, qp):
    data, recon = I.encode_inter(held, crop, qp)
    size = (crop.shape[1], crop.shape[0])
    return len(A.inter_entry(qp, size, data)), recon


def webp_residual(held, crop, quality):
    pred = I.predict(held, (crop.shape[1], crop.shape[0])).astype(np.int16)
    residual = np.clip(crop.astype(np.int16) - pred + 128, 0, 255).astype(np.uint8)
    data = A.encode_ref(residual, quality)
    recon = np.clip(pred + A.decode_ref(data).astype(np.int16) - 128, 0, 255).astype(np.uint8)
    return 3 + len(data), recon


def x264_p(held, crop, qp):
    """The two-picture scheme with libx264 (4:2:0, psycho-visual tools off)."""
    height, width = crop.shape[:2]
    pad = [cv2.copyMakeBorder(p, 0, -height % 16, 0, -width % 16, cv2.BORDER_REPLICATE)
           for p in (I.predict(held, (width, height)), crop)]  # fmt: skip
    ctx = av.CodecContext.create("libx264", "w")
    ctx.width, ctx.height, ctx.pix_fmt = pad[0].shape[1], pad[0].shape[0], "yuv420p"
    ctx.time_base = Fraction(1, 1)
    ctx.options = {"preset": "veryslow", "x264-params": (
        f"qp={qp}:ipratio={2 ** ((qp - 12) / 6):.4f}:keyint=10:bframes=0:threads=1:ref=1:"
        "rc-lookahead=0:scenecut=0:psy=0:aq-mode=0")}  # fmt: skip
    packets = []
    for index, pic in enumerate(pad):
        frame = av.VideoFrame.from_ndarray(rgb_to_i420(pic), format="yuv420p")
        frame.pts = index
        packets += ctx.encode(frame)
    packets += ctx.encode(None)
    dec = av.CodecContext.create("h264", "r")
    out = [f for p in packets for f in dec.decode(p)] + list(dec.decode(None))
    recon = i420_to_rgb(out[1].to_ndarray(), out[1].width, out[1].height)[:height, :width]
    return 3 + len(bytes(packets[1])) - 4, recon


WAYS = {"intra": (intra, WEBP_QUALITIES), "hevc-p": (hevc_p, QPS),
        "x264-p": (x264_p, QPS), "webp-res": (webp_residual, WEBP_QUALITIES)}


# ----------------------------------------------------------------------------- quality

def _enlarged(picture: np.ndarray) -> np.ndarray:
    k = max(1, -(-32 // min(picture.shape[:2])))
    return np.repeat(np.repeat(picture, k, 0), k, 1)


def st_lpips(pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    """ST-LPIPS of each ``(original, reconstruction)`` pair."""
    from semcodec.evaluation.metrics.perceptual import st_lpips_per_frame

    return [float(st_lpips_per_frame(_enlarged(a), _enlarged(b))[0]) for a, b in pairs]


def curves(refreshes: list[dict]) -> dict:
    """Per way and setting: total bytes, mean PSNR and mean ST-LPIPS over the refreshes."""
    out = {}
    for way, (code, settings) in WAYS.items():
        rows = []
        for setting in settings:
            coded = [code(r["held"], r["crop"], setting) for r in refreshes]
            pairs = [(r["crop"], recon) for r, (_, recon) in zip(refreshes, coded, strict=True)]
            rows.append({"setting": setting, "bytes": sum(n for n, _ in coded),
                         "psnr": float(np.mean([I.psnr(a, b) for a, b in pairs])),
                         "st_lpips": float(np.mean(st_lpips(pairs)))})
        out[way] = rows
    return out


def bd_rates(table: dict) -> dict:
    """BD-rate (%) of each way against ``intra`` by PSNR and by ST-LPIPS (negated)."""
    import bjontegaard as bd

    def arrays(rows, key):
        rate = np.array([r["bytes"] for r in rows], float)
        quality = np.array([r[key] if key == "psnr" else -r[key] for r in rows])
        order = np.argsort(quality)
        return rate[order], quality[order]

    out = {}
    for way, rows in table.items():
        if way == "intra":
            continue
        out[way] = {}
        for key in ("psnr", "st_lpips"):
            try:
                out[way][key] = float(bd.bd_rate(*arrays(table["intra"], key), *arrays(rows, key),
                                                 method="pchip", min_overlap=0))  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - a curve that does not overlap
                out[way][key] = f"n/a ({exc})"
    return out


def equal_quality(refreshes: list[dict]) -> dict:
    """The encoder's choice: the WebP at the stream's quality against the cheapest ``hevc-p``
    of at least its PSNR (each refresh coded the cheaper way, as the edge does)."""
    whole = chosen = 0
    lp_whole, lp_chosen = [], []
    for r in refreshes:
        n, recon = intra(r["held"], r["crop"], r["quality"])
        found = I.code_inter(r["held"], r["crop"], I.psnr(r["crop"], recon))
        inter_n = len(A.inter_entry(found[0], recon.shape[1::-1], found[1])) if found else n
        whole += n
        if found and inter_n < n:
            chosen += inter_n
            lp_chosen.append((r["crop"], found[2]))
        else:
            chosen += n
            lp_chosen.append((r["crop"], recon))
        lp_whole.append((r["crop"], recon))
    return {"refreshes": len(refreshes), "whole_bytes": whole, "chosen_bytes": chosen,
            "saving": whole / chosen if chosen else float("nan"),
            "st_lpips_whole": float(np.mean(st_lpips(lp_whole))) if lp_whole else None,
            "st_lpips_chosen": float(np.mean(st_lpips(lp_chosen))) if lp_chosen else None}


# ----------------------------------------------------------------------------- main

def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("clips", nargs="*", default=["pets", "tud"], choices=sorted(CLIPS))
    parser.add_argument("--json", help="write every number here too")
    args = parser.parse_args(argv)
    results = {}
    for name in args.clips:
        seq, start, count = CLIPS[name]
        frames, info, _ = load_sequence(f"../shared/data/{seq}", count, (), start)
        refreshes, after = record_refreshes(frames, info.fps, inter=True)
        _, before = record_refreshes(frames, info.fps, inter=False)
        table = curves(refreshes) if refreshes else {}
        results[name] = {"clip": f"{seq} {start}-{start + count - 1}", "before": before,
                         "after": after, "curves": table,
                         "bd_rate": bd_rates(table) if table else {},
                         "equal_quality": equal_quality(refreshes)}
        report(name, results[name])
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)


def report(name: str, r: dict) -> None:
    print(f"== {name}: {r['clip']}, level 1 at its defaults")
    for label in ("before", "after"):
        print(f"  stream {label:6s}", json.dumps(r[label]))
    eq = r["equal_quality"]
    print(f"  {eq['refreshes']} refreshes at the stream's quality: whole WebPs "
          f"{eq['whole_bytes']} B, each the cheaper way {eq['chosen_bytes']} B "
          f"({eq['saving']:.2f}x); ST-LPIPS {eq['st_lpips_whole']} -> {eq['st_lpips_chosen']}")
    for way, rows in r["curves"].items():
        cells = "  ".join(f"{x['setting']}:{x['bytes']}B/{x['psnr']:.2f}dB/{x['st_lpips']:.3f}"
                          for x in rows)  # fmt: skip
        print(f"  {way:8s} {cells}")
    for way, bd in r["bd_rate"].items():
        print(f"  BD-rate {way} vs intra: " + ", ".join(
            f"{k} {v:.1f} % ({1 / (1 + v / 100):.2f}x)" if isinstance(v, float) else f"{k} {v}"
            for k, v in bd.items()))  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
