"""Fuzz harness of the cloud decoder: the bitstream parser in-process, full decodes in workers.

Usage::

    .venv/bin/python tests/fuzz/fuzz_decoder.py --parser-inputs N --decodes M --seed S \\
        --timeout SECONDS [--jobs J] [--rss-mb 1500] [--no-real]

(a) **parser**: N mutated byte strings (blind byte edits, and structure-aware edits with the
CRCs recomputed) fed in-process to ``read_stream``, ``iter_units``, ``StreamHeader.from_bytes``
and ``Unit.from_bytes``. A ``BitstreamError`` is a *typed* error; anything else is *untyped*.

(b) **decode**: M mutated streams decoded through ``cloud-decoder decode`` (``main()``, outputs
included) in worker processes, each decoding many inputs. Per input: exit status 0 (ok) or 2
(typed error, one line, nothing left under the output name); an exception out of ``main`` is
untyped; a worker that dies is a crash; an input over ``--timeout`` seconds is a hang; an input
whose peak RSS (reset per input via ``/proc/self/clear_refs``) goes over ``--rss-mb`` is a
memory failure. A worker is replaced after any crash, hang or memory failure.

Seeds: synthetic streams (no model needed; tiny frames, every level, WebP/HEVC/AV1
keyframes) and, unless ``--no-real``, 3-frame streams of the embedded sample encoded by the
real edge encoder at levels 0-3 (needs the models). Seeds are cached under ``.cache/fuzz/``.
Every failing input is saved under ``.cache/fuzz/failures/`` with its traceback. Prints a
summary table; exits 1 on any untyped error, crash, hang or memory failure.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import multiprocessing
import os
import random
import select
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = REPO / ".cache" / "fuzz"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

SYNTHETIC = [  # (level, frames, size, keyframe coder)
    (0, 3, (48, 32), "webp"), (1, 4, (48, 32), "webp"), (2, 4, (48, 32), "webp"),
    (3, 3, (48, 32), "webp"), (1, 3, (37, 23), "webp"), (2, 3, (64, 48), "hevc"),
    (1, 3, (32, 32), "av1"), (1, 4, (48, 32), "webp", {"plate_refine": 0.1}),
]  # fmt: skip


# ----------------------------------------------------------------------------- seeds


def _seed_version(level: int) -> str:
    """Names a cached seed by the format version and the level's settings, so a seed made by
    an older format or level preset is made again instead of being reused."""
    from semcodec.codec.bitstream import FORMAT_VERSION
    from semcodec.codec.scaffold.levels import LEVELS

    text = json.dumps([FORMAT_VERSION, LEVELS[level].to_dict()], sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def synthetic_seeds(cache: Path | None = CACHE) -> list[bytes]:
    """Small model-free streams of every level (cached when ``cache`` is given)."""
    from semc_streams import stream_bytes, synthetic_config, synthetic_stream

    out = []
    for level, count, size, coder, *extra in SYNTHETIC:
        overrides = extra[0] if extra else {}
        tag = "".join(f"-{k}{v}" for k, v in sorted(overrides.items()))
        name = (f"synthetic-l{level}-{size[0]}x{size[1]}-{coder}{tag}-"
                f"{_seed_version(level)}.semc")  # fmt: skip
        path = cache / name if cache else None
        if path is not None and path.is_file():
            out.append(path.read_bytes())
            continue
        config = synthetic_config(level, keyframe_coder=coder, keyframe_interval=2, **overrides)
        data = stream_bytes(*synthetic_stream(level, count, size, config=config))
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        out.append(data)
    return out


def real_seeds(cache: Path = CACHE, frames: int = 3) -> list[bytes]:
    """Streams of the embedded sample's first frames by the real edge encoder, levels 0-3.

    Returns ``[]`` (with a note on stderr) when the models are not available.
    """
    out = []
    for level in range(4):
        path = cache / f"real-l{level}-{frames}f-{_seed_version(level)}.semc"
        if not path.is_file():
            try:
                _encode_real(path, level, frames)
            except Exception as exc:  # noqa: BLE001 - the models may be absent
                print(f"fuzz: no real seeds ({type(exc).__name__}: {exc})", file=sys.stderr)
                return out
        out.append(path.read_bytes())
    return out


def _encode_real(path: Path, level: int, frames: int) -> None:
    from semcodec.codec.core.sources import open_source, sample_path
    from semcodec.codec.scaffold.codec import encode_to_file
    from semcodec.codec.scaffold.levels import level_config

    pictures = open_source(sample_path()).read(start=1, count=frames)
    height, width = pictures.shape[1:3]
    path.parent.mkdir(parents=True, exist_ok=True)
    encode_to_file(path, pictures, level_config(level, keyframe_interval=2), 7.0,
                   (width, height))  # fmt: skip


# ----------------------------------------------------------------------------- results


@dataclass
class Tally:
    """Counts of one phase."""

    phase: str
    inputs: int = 0
    ok: int = 0
    typed: int = 0
    untyped: int = 0
    crashes: int = 0
    hangs: int = 0
    memory: int = 0
    peak_rss_mb: float = 0.0
    seconds: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def failures(self) -> int:
        return self.untyped + self.crashes + self.hangs + self.memory

    def merge(self, other: Tally) -> None:
        for name in ("inputs", "ok", "typed", "untyped", "crashes", "hangs", "memory"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.peak_rss_mb = max(self.peak_rss_mb, other.peak_rss_mb)
        for k, v in other.kinds.items():
            self.kinds[k] = self.kinds.get(k, 0) + v


def save_failure(folder: Path, kind: str, data: bytes, text: str) -> Path:
    """Saves a failing input and its report as ``folder/KIND-SHA.semc`` and ``.txt``."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"{kind}-{hashlib.sha1(data).hexdigest()[:12]}"
    stem.with_suffix(".semc").write_bytes(data)
    stem.with_suffix(".txt").write_text(text)
    return stem.with_suffix(".semc")


# ----------------------------------------------------------------------------- parser


def parse_all(data: bytes) -> None:
    """Every public parser entry point on ``data``; only non-BitstreamErrors propagate."""
    from semcodec.codec.bitstream import BitstreamError, StreamHeader, Unit, iter_units, read_stream

    for source in (data, io.BytesIO(data)):
        with contextlib.suppress(BitstreamError):
            _, units = read_stream(source)
            for _ in units:
                pass
    with contextlib.suppress(BitstreamError):
        StreamHeader.from_bytes(data)
    start = _header_end(data) or 0
    offset, seq = start, 0
    with contextlib.suppress(BitstreamError):
        for _, end in iter_units(data, start):
            Unit.from_bytes(data[offset:end], seq=seq)
            offset, seq = end, seq + 1
    with contextlib.suppress(BitstreamError):
        Unit.from_bytes(data[offset:], seq=seq)


def _header_end(data: bytes) -> int | None:
    """Where the stream header at the start of ``data`` ends, if it parses alone."""
    from semcodec.codec.bitstream import BitstreamError, StreamHeader, decode_uvarint

    try:
        length, pos = decode_uvarint(data, 5)
        end = pos + length + 4
        StreamHeader.from_bytes(data[:end])
    except BitstreamError:
        return None
    return end


def _parse_one(data: bytes) -> str | None:
    """None when every entry point ended normally or with a BitstreamError; else a traceback."""
    try:
        parse_all(data)
    except Exception:  # noqa: BLE001 - the point is to catch what is not typed
        from semcodec.codec.bitstream import BitstreamError

        exc = sys.exc_info()[1]
        if isinstance(exc, BitstreamError):
            return None
        return traceback.format_exc()
    return None


def run_parser_fuzz(count: int, seed: int, seeds: list[bytes], failures: Path | None = None,
                    report: bool = False) -> Tally:  # fmt: skip
    """Feeds ``count`` mutated inputs to the parser in this process."""
    from mutate import mutate

    tally = Tally("parser")
    rng = random.Random(seed)
    start = time.perf_counter()
    for n in range(count):
        data = mutate(rng, seeds, structure_share=0.5)
        problem = _parse_one(data)
        tally.inputs += 1
        if report:
            _report_progress("parser", n + 1, count, start)
        if problem is None:
            tally.typed += 1
            continue
        tally.untyped += 1
        if failures is not None:
            save_failure(failures, "parser", data, problem)
    tally.seconds = time.perf_counter() - start
    tally.peak_rss_mb = _own_peak_rss_mb()
    return tally


def _parser_job(args: tuple[int, int, list[bytes], str | None]) -> Tally:
    count, seed, seeds, failures = args
    return run_parser_fuzz(
        count, seed, seeds, Path(failures) if failures else None, report=seed % 1000 == 0
    )  # the first job reports for all


def run_parser_fuzz_parallel(count: int, seed: int, seeds: list[bytes], jobs: int,
                             failures: Path | None) -> Tally:  # fmt: skip
    """:func:`run_parser_fuzz` split over ``jobs`` processes (seeds ``seed``, ``seed + 1``...)."""
    if jobs <= 1:
        return run_parser_fuzz(count, seed, seeds, failures, report=True)
    start = time.perf_counter()
    shares = [count // jobs + (1 if i < count % jobs else 0) for i in range(jobs)]
    work = [(n, seed * 1000 + i, seeds, str(failures) if failures else None)
            for i, n in enumerate(shares)]  # fmt: skip
    total = Tally("parser")
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for tally in pool.imap_unordered(_parser_job, work):
            total.merge(tally)
    total.seconds = time.perf_counter() - start
    return total


def _own_peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- decode worker


def _read_message(stream) -> bytes | None:
    head = stream.read(4)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">I", head)
    return stream.read(size)


def _write_message(stream, payload: bytes) -> None:
    stream.write(struct.pack(">I", len(payload)) + payload)
    stream.flush()


def _reset_peak_rss() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return _own_peak_rss_mb()


def decode_in_worker(data: bytes, workdir: Path) -> dict:
    """One ``cloud-decoder decode`` through ``main()``; the outcome as a dict."""
    import shutil

    from semcodec.cloud.cli import main

    path, out = workdir / "in.semc", workdir / "out"
    path.write_bytes(data)
    shutil.rmtree(out, ignore_errors=True)
    err = io.StringIO()
    _reset_peak_rss()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = main(["decode", str(path), "-o", str(out), "-q"])
        result = {"status": status, "message": err.getvalue().strip()}
    except BaseException:  # noqa: BLE001 - an untyped error is what is being looked for
        result = {"status": None, "message": traceback.format_exc()}
    result["seconds"] = time.perf_counter() - start
    result["rss_mb"] = _peak_rss_mb()
    leftovers = [p.name for p in workdir.iterdir() if p.name not in ("in.semc", "out")]
    result["leftovers"] = leftovers
    result["out_exists"] = out.exists()
    for extra in leftovers:
        shutil.rmtree(workdir / extra, ignore_errors=True)
    return result


def worker_main() -> int:
    """Decodes length-prefixed inputs from stdin; writes JSON results to stdout."""
    import logging

    logging.getLogger("semcodec").setLevel(logging.ERROR)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stray prints must not corrupt the protocol
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        _write_message(stdout, b"ready")
        while (data := _read_message(stdin)) is not None:
            result = decode_in_worker(data, Path(tmp))
            _write_message(stdout, json.dumps(result).encode())
    return 0


class Worker:
    """A decode worker process (this script with ``--worker``)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._buffer = b""
        ready = self._receive(120.0, None)
        if ready != b"ready":
            raise RuntimeError("a fuzz worker did not start")

    def _receive(self, timeout: float, rss_cap_mb: float | None) -> bytes | None:
        """One message, or None on timeout / death; kills the worker over ``rss_cap_mb``."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            if len(self._buffer) >= 4:
                (size,) = struct.unpack(">I", self._buffer[:4])
                if len(self._buffer) >= 4 + size:
                    message = self._buffer[4 : 4 + size]
                    self._buffer = self._buffer[4 + size :]
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 0.05))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:  # the worker closed its output: it died (or is dying)
                    self.eof = True
                    return None
                self._buffer += chunk
            elif rss_cap_mb is not None and _rss_mb(self.proc.pid) > rss_cap_mb:
                self.rss_exceeded = True
                return None

    def decode(self, data: bytes, timeout: float, rss_cap_mb: float) -> dict:
        """The worker's result for ``data``, or ``{"failure": "crash" | "hang" | "memory"}``."""
        self.rss_exceeded = self.eof = False
        try:
            _write_message(self.proc.stdin, data)
        except (BrokenPipeError, OSError):
            return {"failure": "crash", "message": "the worker was gone before the input"}
        message = self._receive(timeout, rss_cap_mb)
        if message is not None:
            return json.loads(message)
        if self.rss_exceeded:
            self.kill()
            return {"failure": "memory", "message": f"RSS over {rss_cap_mb:.0f} MB"}
        if self.eof or self.proc.poll() is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            return {"failure": "crash", "message": f"worker died: exit {self.proc.returncode}"}
        self.kill()
        return {"failure": "hang", "message": f"no result within {timeout:g} s"}

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def classify(result: dict, tally: Tally, rss_cap_mb: float) -> str | None:
    """Adds ``result`` to ``tally``; returns a failure kind, or None when it was fine."""
    failure = result.get("failure")
    if failure is None:
        tally.peak_rss_mb = max(tally.peak_rss_mb, result["rss_mb"])
        status, message = result["status"], result["message"]
        if result["rss_mb"] > rss_cap_mb:
            failure = "memory"
        elif status == 0 and result["out_exists"] and not result["leftovers"]:
            tally.ok += 1
        elif status == 2 and not result["out_exists"] and not result["leftovers"]:
            tally.typed += 1
            kind = " ".join(message.split("error:", 1)[-1].split()[:3]) or "?"
            tally.kinds[kind] = tally.kinds.get(kind, 0) + 1
        else:
            failure = "untyped"
    if failure is not None:
        attr = {"crash": "crashes", "hang": "hangs"}.get(failure, failure)
        setattr(tally, attr, getattr(tally, attr) + 1)
    return failure


def _decode_lane(lane: int, count: int, seed: int, seeds: list[bytes], timeout: float,
                 rss_cap_mb: float, progress) -> Iterator[tuple[bytes, dict]]:  # fmt: skip
    """``count`` mutated streams (made lazily, seed ``(seed, lane)``) through one worker."""
    from mutate import mutate

    rng = random.Random(seed * 1000 + lane)
    worker = Worker()
    try:
        for _ in range(count):
            data = mutate(rng, seeds, structure_share=0.85)
            result = worker.decode(data, timeout, rss_cap_mb)
            progress()
            yield data, result
            if "failure" in result:
                worker = Worker()
    finally:
        worker.close()


def run_decode_fuzz(count: int, seed: int, seeds: list[bytes], timeout: float, jobs: int = 1,
                    rss_cap_mb: float = 1500.0, failures: Path | None = None) -> Tally:  # fmt: skip
    """Decodes ``count`` mutated streams through the CLI in ``jobs`` worker processes."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    jobs = max(jobs, 1)
    tally = Tally("decode")
    lock = threading.Lock()
    done = [0]
    start = time.perf_counter()

    def progress() -> None:
        with lock:
            done[0] += 1
            _report_progress("decode", done[0], count, start)

    def lane(k: int) -> None:
        share = count // jobs + (1 if k < count % jobs else 0)
        for data, result in _decode_lane(k, share, seed, seeds, timeout, rss_cap_mb, progress):
            with lock:
                tally.inputs += 1
                failure = classify(result, tally, rss_cap_mb)
            if failure is not None and failures is not None:
                save_failure(failures, f"decode-{failure}", data, json.dumps(result, indent=1))

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lane, range(jobs)))
    tally.seconds = time.perf_counter() - start
    return tally


def _report_progress(phase: str, done: int, total: int, start: float) -> None:
    """A progress line on stderr at every 10 % (for long runs)."""
    step = max(total // 10, 1)
    if done % step == 0 or done == total:
        rate = done / max(time.perf_counter() - start, 1e-9)
        print(f"fuzz: {phase} {done}/{total} ({rate:.1f}/s)", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- report


def summary(tallies: list[Tally]) -> str:
    """The summary table (one row per phase)."""
    head = ("phase", "inputs", "ok", "typed errors", "untyped", "crashes", "hangs", "memory",
            "peak RSS MB", "inputs/s")  # fmt: skip
    rows = [head]
    for t in tallies:
        rate = t.inputs / t.seconds if t.seconds else 0.0
        rows.append((t.phase, t.inputs, t.ok, t.typed, t.untyped, t.crashes, t.hangs, t.memory,
                     f"{t.peak_rss_mb:.0f}", f"{rate:.1f}"))  # fmt: skip
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    lines = ["  ".join(str(v).rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parser-inputs", type=int, default=10000, metavar="N")
    parser.add_argument("--decodes", type=int, default=100, metavar="M")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="per decode (default: 30)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1, metavar="J")
    parser.add_argument("--rss-mb", type=float, default=1500.0,
                        help="peak RSS a decode may reach (default: 1500)")  # fmt: skip
    parser.add_argument("--no-real", action="store_true",
                        help="synthetic seeds only (no models needed)")  # fmt: skip
    parser.add_argument("--failures", type=Path, default=CACHE / "failures")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.worker:
        return worker_main()
    seeds = synthetic_seeds() + ([] if args.no_real else real_seeds())
    print(f"fuzz: {len(seeds)} seed streams, seed {args.seed}", file=sys.stderr)
    tallies = []
    if args.parser_inputs:
        tallies.append(run_parser_fuzz_parallel(args.parser_inputs, args.seed, seeds,
                                                args.jobs, args.failures))  # fmt: skip
    if args.decodes:
        tallies.append(run_decode_fuzz(args.decodes, args.seed, seeds, args.timeout, args.jobs,
                                       args.rss_mb, args.failures))  # fmt: skip
    print(summary(tallies))
    kinds = {k: v for t in tallies for k, v in t.kinds.items()}
    if kinds:
        top = sorted(kinds.items(), key=lambda kv: -kv[1])[:12]
        print("most common typed decode errors (first words): "
              + "; ".join(f"{k!r} {v}" for k, v in top))  # fmt: skip
    failed = sum(t.failures for t in tallies)
    if failed:
        print(f"fuzz: {failed} failing input(s) saved under {args.failures}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
