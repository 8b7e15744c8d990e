"""Build the embedded sample ``datasets/sample/PETS09-S2L1-384x288`` from ``../shared/data``.

Plain script (not part of the ``semcodec`` package); run it with the project's interpreter::

    .venv/bin/python datasets/make_sample.py [--shared ../shared/data] [--out DIR]

It takes ``--count`` consecutive frames of ``PETS09-S2L1/img1`` starting at ``--start``
(default 1..60), checks the inputs against ``SHA256SUMS``, halves them to 384x288 with
``cv2.INTER_AREA``, writes JPEG quality 95 renumbered from 1, a MOT15 ``gt/gt.txt``
(frames renumbered, x, y, w, h times 0.5 with 3 decimals, other columns verbatim), a
``seqinfo.ini``, a ``README.md`` and a ``SHA256SUMS``. The output depends only on the
inputs and the OpenCV build (its bundled JPEG encoder), so re-running it is a no-op.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = REPO.parent / "shared" / "data"
SEQUENCE = "PETS09-S2L1"
SAMPLE_NAME = "PETS09-S2L1-384x288"
SCALE = 0.5
OUT_W, OUT_H = 384, 288
FPS = 7
JPEG_QUALITY = 95


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_sums(shared: Path) -> dict[str, str]:
    """Map ``PETS09-S2L1/img1/000001.jpg``-style paths to hex digests from SHA256SUMS."""
    sums: dict[str, str] = {}
    for line in (shared / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        sums[name.removeprefix("./")] = digest
    return sums


def check_input(path: Path, rel: str, sums: dict[str, str]) -> None:
    """Exit with a message when ``path`` does not match its SHA256SUMS entry."""
    expected = sums.get(rel)
    if expected is None or sha256_file(path) != expected:
        sys.exit(f"error: {path} is missing from SHA256SUMS or does not match it")


def make_frames(shared: Path, out: Path, start: int, count: int, sums: dict[str, str]) -> None:
    """Write ``out/img1/000001.jpg...``: (288, 384, 3) uint8, JPEG q95."""
    (out / "img1").mkdir(parents=True, exist_ok=True)
    for stale in (out / "img1").glob("*.jpg"):
        stale.unlink()
    for k in range(count):
        rel = f"{SEQUENCE}/img1/{start + k:06d}.jpg"
        check_input(shared / rel, rel, sums)
        bgr = cv2.imread(str(shared / rel), cv2.IMREAD_COLOR)
        small = cv2.resize(bgr, (OUT_W, OUT_H), interpolation=cv2.INTER_AREA)
        ok, buf = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            sys.exit(f"error: JPEG encoding failed for {rel}")
        (out / "img1" / f"{k + 1:06d}.jpg").write_bytes(np.asarray(buf).tobytes())


def make_groundtruth(shared: Path, out: Path, start: int, count: int, sums: dict[str, str]) -> int:
    """Write ``out/gt/gt.txt`` (MOT15, 10 columns); returns the number of rows."""
    rel = f"{SEQUENCE}/gt/gt.txt"
    check_input(shared / rel, rel, sums)
    rows = []
    for line in (shared / rel).read_text().splitlines():
        cols = line.strip().split(",")
        if len(cols) != 10:
            continue
        frame = int(float(cols[0]))
        if not start <= frame < start + count:
            continue
        box = [f"{float(v) * SCALE:.3f}" for v in cols[2:6]]
        rows.append(",".join([str(frame - start + 1), cols[1], *box, *cols[6:]]))
    (out / "gt").mkdir(parents=True, exist_ok=True)
    (out / "gt" / "gt.txt").write_text("".join(r + "\n" for r in rows))
    return len(rows)


def seqinfo_text(count: int) -> str:
    """MOTChallenge ``seqinfo.ini`` of the sample."""
    return (
        "[Sequence]\n"
        f"name={SAMPLE_NAME}\nimDir=img1\nframeRate={FPS}\nseqLength={count}\n"
        f"imWidth={OUT_W}\nimHeight={OUT_H}\nimExt=.jpg\n"
    )


def readme_text(start: int, count: int, gt_rows: int) -> str:
    """Attribution, licence and recipe of the sample."""
    last = start + count - 1
    return f"""# {SAMPLE_NAME}: embedded sample

{count} frames of PETS 2009 S2.L1 View 001 at half resolution (384x288, 7 fps) with
MOT15 ground truth, so that the tests and the main job run without `../shared`.

| field | value |
|---|---|
| frames | {count}: `img1/000001.jpg`..`img1/{count:06d}.jpg` = source frames {start}..{last} |
| size, fps | 384x288 (source 768x576 halved), 7 fps |
| storage | JPEG quality 95, re-encoded after `cv2.resize(..., INTER_AREA)` |
| ground truth | `gt/gt.txt`, MOT15, {gt_rows} rows of `frame, id, x, y, w, h, conf, wx, wy, wz` |
| checksums | `SHA256SUMS` (`sha256sum -c SHA256SUMS` in this folder) |

## Sources and licences

- Video: PETS 2009 benchmark data, sequence S2.L1, View 001 (PETS 2009 workshop,
  Computational Vision Group, University of Reading), <http://www.cvg.reading.ac.uk/PETS2009/>.
  Made available for research use; cite J. Ferryman and A. Shahrokni, "PETS2009: Dataset and
  challenge", IEEE PETS-Winter 2009, when you publish results on it.
- Frames and ground truth as packaged by MOTChallenge 2D MOT 2015 (MOT15),
  <https://motchallenge.net/data/MOT15/>: licence CC BY-NC-SA 3.0. Cite L. Leal-Taixe,
  A. Milan, I. Reid, S. Roth, K. Schindler, "MOTChallenge 2015: Towards a benchmark for
  multi-target tracking", arXiv:1504.01942. This sample, a derived work, carries the same
  licence (CC BY-NC-SA 3.0, non-commercial, share-alike).
- Copies used (see `../shared/data/MANIFEST.md`): the JPEGs from GitHub
  `nathanrooy/rpi-urban-mobility-tracker` @ `490323abd7cb533331f61a83cbd3bf92e51ac6fd`,
  `data/images/PETS09-S2L1/` (the MOT15 frames); `gt.txt` from GitHub
  `gonzalocarreteroh/MASA-OA` @ `ff2036cf4ddee289aec4d9e5cc03bdd734580b7a`,
  `benchmarks/MOT15/PETS09-S2L1/gt/gt.txt`. Both were checked against
  `../shared/data/SHA256SUMS` when this sample was made.

## How it was made

`.venv/bin/python datasets/make_sample.py --start {start} --count {count}` reads
`../shared/data/PETS09-S2L1`, verifies every input file against `SHA256SUMS`, downscales each
frame to 384x288 with `cv2.INTER_AREA`, writes it as JPEG quality 95 (OpenCV's encoder,
renumbered from 1), and keeps the `gt.txt` rows of those frames with the frame renumbered
the same way, `x, y, w, h` multiplied by 0.5 (3 decimals) and `id, conf, wx, wy, wz`
unchanged. The pixels are thus a second lossy generation of the original JPEGs: use them
for tests and demonstrations, and the full-size `../shared/data/PETS09-S2L1` for reported
numbers.
"""


def write_sums(out: Path) -> None:
    """Write ``out/SHA256SUMS`` over every other file, sorted, ``sha256sum -c`` format."""
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    lines = [f"{sha256_file(p)}  ./{p.relative_to(out).as_posix()}\n" for p in files]
    (out / "SHA256SUMS").write_text("".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="shared data dir")
    parser.add_argument("--out", type=Path, default=REPO / "datasets" / "sample" / SAMPLE_NAME)
    parser.add_argument("--start", type=int, default=1, help="first source frame (1-based)")
    parser.add_argument("--count", type=int, default=60, help="number of frames")
    args = parser.parse_args(argv)
    if not (args.shared / SEQUENCE / "img1").is_dir():
        sys.exit(f"error: {args.shared / SEQUENCE / 'img1'} not found; pass --shared DIR")
    if args.start < 1 or args.count < 1:
        sys.exit("error: --start and --count must be >= 1")
    sums = read_sums(args.shared)
    args.out.mkdir(parents=True, exist_ok=True)
    make_frames(args.shared, args.out, args.start, args.count, sums)
    gt_rows = make_groundtruth(args.shared, args.out, args.start, args.count, sums)
    (args.out / "seqinfo.ini").write_text(seqinfo_text(args.count))
    (args.out / "README.md").write_text(readme_text(args.start, args.count, gt_rows))
    write_sums(args.out)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {args.out}: {args.count} frames, {gt_rows} gt rows, {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
