"""Issue 54's next rung, tried: a network that redraws each person the default decoder drew,
trained on frames cut from decoded level-1 streams (not on references).

    python docs/diagnostics/people_refiner_trial.py pairs OUT.npz SEQ START FRAMES CAMERA EVERY
    python docs/diagnostics/people_refiner_trial.py train OUT.pt INIT STEPS TRAIN,... HELD,...
    python docs/diagnostics/people_refiner_trial.py patch SNAPSHOT

``pairs``: level 1 at 0.002 and 0.004 BPP (the default decoder) on frames START.. of SEQ
through ``CAMERA`` (a ``--camera-transform``, ``-`` for none); on every EVERY-th frame, two
kinds of 64x128 window pairs (decoded, original): at the ground-truth boxes grown 1.2x (the
benchmark's person crops) and at the decoded boxes grown 1.2x (what the decoder refines).
``train``: fine-tunes a shipped restorer (``ref_restorer_v2``, width 32, or
``ref_restorer_w8``) as ``decoded window -> original window`` (L1 + ST-LPIPS, Adam 5e-4,
batch 16, every second batch mirrored, seed 0), printing the held-out pairs' ST-LPIPS
before and after (the ground-truth windows only). ``patch``: writes into a snapshot's
``codec/reconstruct/restore.py`` the in-frame step: after ``restore`` draws a frame, each
decoded box grown 1.2x is resampled to 64x128, refined, and the refinement's residual
resampled back and added, feathered (``PEOPLE_REFINER=FILE`` and ``PEOPLE_REFINER_WIDTH``
in the environment switch it on), so that ``short_clips.sh`` can measure it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import cv2
import numpy as np

#: ``(width, height)`` of a window as the network sees it (the benchmark's person crop).
CANVAS = (64, 128)
#: A window is its box grown by this about its centre (the benchmark's margin).
GROW = 1.2
TARGETS = (0.002, 0.004)


def window(box, width: int, height: int) -> tuple[int, int, int, int] | None:
    """``(x0, y0, x1, y1)`` of ``box`` grown :data:`GROW`x, clipped; None when under 8 px."""
    x1, y1, x2, y2 = (float(v) for v in box)
    cx, cy, hw, hh = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) * GROW / 2, (y2 - y1) * GROW / 2
    a, b = max(0, int(round(cx - hw))), max(0, int(round(cy - hh)))
    c, d = min(width, int(round(cx + hw))), min(height, int(round(cy + hh)))
    return (a, b, c, d) if c - a >= 8 and d - b >= 8 else None


def on_canvas(picture: np.ndarray, win: tuple[int, int, int, int]) -> np.ndarray:
    a, b, c, d = win
    shrink = (c - a) > CANVAS[0] or (d - b) > CANVAS[1]
    return cv2.resize(picture[b:d, a:c], CANVAS,
                      interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)  # fmt: skip


def pairs(out: str, sequence: str, start: str, count: str, camera: str, every: str) -> None:
    from semcodec.codec.scaffold.decoder import decode_stream
    from semcodec.evaluation.codecs.base import Setting
    from semcodec.evaluation.codecs.scaffold import ScaffoldCodec
    from semcodec.evaluation.data.sequences import load_sequence
    from semcodec.evaluation.metrics.person_region import crop_windows

    options = (("camera_transform", camera),) if camera != "-" else ()
    pixels, info, gt = load_sequence(sequence, int(count), options, int(start))
    frames = np.stack(pixels)
    height, width = frames.shape[1:3]
    rows = {"original": [], "decoded": [], "target": [], "ground_truth": []}
    for target in TARGETS:
        codec = ScaffoldCodec()
        encoded = codec.encode(frames, Setting.parse(f"level=1,target_bpp={target}"), info.fps)
        decoded = codec.decode(encoded)
        for t, (scaffold_frame, _) in enumerate(decode_stream(encoded.payload)):
            if t % int(every):
                continue
            at_truth = crop_windows(gt, t + 1, width, height)
            at_boxes = [window(b, width, height) for b in scaffold_frame.scaffold.tracks.boxes]
            for truth, win in [(True, w) for w in at_truth] + [(False, w) for w in at_boxes]:
                if win is None:
                    continue
                rows["original"].append(on_canvas(frames[t], win))
                rows["decoded"].append(on_canvas(decoded[t], win))
                rows["target"].append(target)
                rows["ground_truth"].append(truth)
        print(f"{out}: {target} BPP target, {len(rows['target'])} pairs so far", flush=True)
    np.savez_compressed(out, **{k: np.asarray(v) for k, v in rows.items()})


def _tensor(pictures: np.ndarray):
    import torch

    return torch.from_numpy(pictures).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


def _held_scores(model, metric, held: dict[str, np.lib.npyio.NpzFile]) -> dict[str, float]:
    import torch

    scores = {}
    with torch.inference_mode():
        for name, data in held.items():
            for target in TARGETS:
                keep = (data["target"] == target) & data["ground_truth"]
                x, y = _tensor(data["decoded"][keep]), _tensor(data["original"][keep])
                out = model(x, torch.zeros_like(x)).clamp(-1, 1)
                scores[f"{name} {target} drawn"] = float(metric(x, y).mean())
                scores[f"{name} {target} refined"] = float(metric(out, y).mean())
    return scores


def train(out: str, init: str, steps: str, training: str, held_out: str) -> None:
    import torch

    from semcodec.codec.reconstruct.restore import load_restorer, restorer_weights
    from semcodec.evaluation.metrics.perceptual import load_stlpips

    torch.manual_seed(0)
    sets = [np.load(f) for f in training.split(",")]
    x_all = torch.cat([_tensor(s["decoded"]) for s in sets])
    y_all = torch.cat([_tensor(s["original"]) for s in sets])
    held = {Path(f).stem: np.load(f) for f in held_out.split(",")}
    metric = load_stlpips().eval()
    for p in metric.parameters():
        p.requires_grad_(False)
    model = load_restorer(restorer_weights(init)).eval()
    print(f"{len(x_all)} pairs; held out, {init} as it is:", _held_scores(model, metric, held))
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), 5e-4)
    generator = torch.Generator().manual_seed(0)
    started = time.perf_counter()
    for step in range(int(steps)):
        pick = torch.randint(0, len(x_all), (16,), generator=generator)
        x, y = x_all[pick], y_all[pick]
        if step % 2:
            x, y = x.flip(3), y.flip(3)
        refined = model(x, torch.zeros_like(x))
        loss = (refined - y).abs().mean() + metric(refined.clamp(-1, 1), y).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % 100 == 0:
            print(f"step {step + 1}: loss {loss.item():.4f} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
    model.eval()
    print("held out, refined:", _held_scores(model, metric, held))
    torch.save(model.state_dict(), out)


PATCH = '''

# --- people_refiner_trial.py patch (a trial; not the shipped decoder) ---
import os as _os

_PEOPLE = None
if _os.environ.get("PEOPLE_REFINER"):
    _PEOPLE = ReferenceRestorer(int(_os.environ.get("PEOPLE_REFINER_WIDTH", "32")), 4)
    _PEOPLE.load_state_dict(torch.load(_os.environ["PEOPLE_REFINER"], map_location="cpu"))
    _PEOPLE.eval()


def _refined_people(picture, boxes):
    import sys as _sys
    _sys.path.insert(0, _os.environ["PEOPLE_REFINER_TRIAL_DIR"])
    from people_refiner_trial import on_canvas, window
    height, width = picture.shape[:2]
    wins = [w for w in (window(b, width, height) for b in boxes) if w is not None]
    if not wins:
        return picture
    x = torch.from_numpy(np.stack([on_canvas(picture, w) for w in wins]))
    x = x.permute(0, 3, 1, 2).float().div(127.5).sub(1)
    with inference():
        residual = ((_PEOPLE(x, torch.zeros_like(x)).clamp(-1, 1) - x) * 127.5)
    residual = residual.permute(0, 2, 3, 1).numpy()
    acc = np.zeros((height, width, 3), np.float32)
    weight = np.zeros((height, width, 1), np.float32)
    for (a, b, c, d), r in zip(wins, residual):
        up = cv2.resize(r, (c - a, d - b), interpolation=cv2.INTER_LINEAR)
        ramp = max(2.0, 0.08 * (d - b))
        fy = np.minimum(np.arange(d - b) + 0.5, (d - b) - np.arange(d - b) - 0.5) / ramp
        fx = np.minimum(np.arange(c - a) + 0.5, (c - a) - np.arange(c - a) - 0.5) / ramp
        w = (np.clip(fy, 0, 1)[:, None] * np.clip(fx, 0, 1)[None])[..., None]
        acc[b:d, a:c] += w * up
        weight[b:d, a:c] += w
    out = picture.astype(np.float32) + acc / np.maximum(weight, 1.0)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


_restore_reconstruct = RestoreReconstructor.reconstruct


def _reconstruct(self, frame):
    picture = _restore_reconstruct(self, frame)
    if _PEOPLE is not None and len(frame.scaffold.tracks.boxes):
        picture = self._previous = _refined_people(picture, frame.scaffold.tracks.boxes)
    return picture


RestoreReconstructor.reconstruct = _reconstruct
'''


def patch(snapshot: str) -> None:
    path = Path(snapshot) / "semcodec" / "codec" / "reconstruct" / "restore.py"
    text = path.read_text()
    if "people_refiner_trial.py patch" not in text:
        path.write_text(text + PATCH)
    print(f"patched {path}; set PEOPLE_REFINER, PEOPLE_REFINER_WIDTH and "
          f"PEOPLE_REFINER_TRIAL_DIR={Path(__file__).resolve().parent}")


if __name__ == "__main__":
    commands = {"pairs": (pairs, 6), "train": (train, 5), "patch": (patch, 1)}
    if len(sys.argv) < 2 or sys.argv[1] not in commands \
            or len(sys.argv) - 2 != commands[sys.argv[1]][1]:  # fmt: skip
        sys.exit(__doc__)
    commands[sys.argv[1]][0](*sys.argv[2:])
