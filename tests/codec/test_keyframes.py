"""Intra coders for keyframes: round trips, rate/quality order, registry, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from semcodec.codec import keyframes
from semcodec.codec.keyframes import (
    IntraCoder,
    KeyframeError,
    available_intra_coders,
    create_intra_coder,
    register_intra_coder,
)

CODERS = ["hevc", "av1", "webp"]
#: What each coder's bytes start with: Annex-B start code, AV1 temporal delimiter OBU, RIFF.
MAGIC = {"hevc": b"\x00\x00\x00\x01", "av1": b"\x12\x00", "webp": b"RIFF"}


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255.0**2 / max(mse, 1e-10)))


@pytest.fixture(scope="module")
def frame(sample_frames) -> np.ndarray:
    return sample_frames[0]  # (288, 384, 3) PETS09-S2L1


def test_registry_lists_the_builtin_coders():
    assert set(CODERS) <= set(available_intra_coders())
    for name in CODERS:
        coder = create_intra_coder(name)
        assert isinstance(coder, IntraCoder)
        assert coder.name == name


@pytest.mark.parametrize("name", CODERS)
def test_round_trip_and_quality_order(name, frame):
    coder = create_intra_coder(name)
    height, width = frame.shape[:2]
    low, high = coder.encode(frame, 20), coder.encode(frame, 80)
    assert isinstance(low, bytes) and low.startswith(MAGIC[name])
    decoded_low = coder.decode(low, (width, height))
    decoded_high = coder.decode(high, (width, height))
    for decoded in (decoded_low, decoded_high):
        assert decoded.shape == frame.shape and decoded.dtype == np.uint8
    assert len(high) > len(low)
    assert psnr(decoded_high, frame) > psnr(decoded_low, frame) + 2
    assert psnr(decoded_low, frame) > 24
    assert psnr(decoded_high, frame) > 33
    assert coder.encode(frame, 20) == low  # deterministic


@pytest.mark.parametrize("name", CODERS)
def test_odd_size_and_downscale(name, frame):
    odd = np.ascontiguousarray(frame[:75, :101])
    coder = create_intra_coder(name)
    decoded = coder.decode(coder.encode(odd, 60), (101, 75))
    assert decoded.shape == (75, 101, 3)
    assert psnr(decoded, odd) > 28

    tiny = np.ascontiguousarray(frame[:5, :7])  # below the codecs' minimum: padded
    assert coder.decode(coder.encode(tiny, 60), (7, 5)).shape == (5, 7, 3)

    half = create_intra_coder(name, downscale=0.5)
    assert half.coded_size((384, 288)) == (192, 144)
    full_bytes, half_bytes = coder.encode(frame, 60), half.encode(frame, 60)
    assert len(half_bytes) < 0.6 * len(full_bytes)
    decoded = half.decode(half_bytes, (384, 288))
    assert decoded.shape == frame.shape
    assert psnr(decoded, frame) > 24


def test_quality_mappings_are_documented_extremes():
    assert keyframes.HevcIntraCoder.crf(0) == 51 and keyframes.HevcIntraCoder.crf(100) == 0
    assert keyframes.Av1IntraCoder.crf(0) == 63 and keyframes.Av1IntraCoder.crf(100) == 1
    assert keyframes.WebpIntraCoder.webp_quality(0) == 1
    assert keyframes.WebpIntraCoder.webp_quality(100) == 100


@pytest.mark.parametrize("name", CODERS)
def test_bad_frames_and_quality(name, frame):
    coder = create_intra_coder(name)
    for bad in (
        frame.astype(np.float32),
        frame[..., 0],
        frame[..., :2],
        np.zeros((0, 4, 3), np.uint8),
    ):
        with pytest.raises(KeyframeError):
            coder.encode(bad, 50)
    for quality in (-1, 101, 50.0, True, "50"):
        with pytest.raises(KeyframeError, match="quality"):
            coder.encode(frame, quality)


@pytest.mark.parametrize("name", CODERS)
def test_corrupt_bytes(name, frame):
    coder = create_intra_coder(name)
    good = coder.encode(frame[:64, :64].copy(), 50)
    other = create_intra_coder("webp" if name != "webp" else "hevc").encode(frame[:64, :64], 50)
    rng = np.random.default_rng(1)
    for data in (b"", b"garbage" * 20, rng.bytes(500), good[:6], other):
        with pytest.raises(KeyframeError):
            coder.decode(data, (64, 64))
    with pytest.raises(KeyframeError, match="declares 64x64, expected 128x64"):
        coder.decode(good, (128, 64))  # not the size that was coded: refused from the header
    with pytest.raises(KeyframeError, match="size"):
        coder.decode(good, (0, 64))


def test_bad_options_and_names():
    with pytest.raises(KeyframeError, match="unknown intra coder"):
        create_intra_coder("jpeg2000")
    with pytest.raises(KeyframeError, match="preset"):
        create_intra_coder("hevc", preset="warp-speed")
    with pytest.raises(KeyframeError, match="preset"):
        create_intra_coder("av1", preset=99)
    with pytest.raises(KeyframeError, match="downscale"):
        create_intra_coder("webp", downscale=0)
    with pytest.raises(KeyframeError, match="unexpected keyword"):
        create_intra_coder("webp", crf=3)


def test_register_rejects_duplicates(monkeypatch):
    monkeypatch.setattr(keyframes.INTRA_CODERS, "_classes", dict(keyframes.INTRA_CODERS._classes))

    @register_intra_coder("raw_test")
    class RawCoder(IntraCoder):
        def _encode(self, picture, quality):
            return picture.tobytes()

        def _decode(self, data):
            return None

    assert "raw_test" in available_intra_coders()
    assert RawCoder.name == "raw_test"
    with pytest.raises(ValueError, match="already registered"):
        register_intra_coder("hevc")(RawCoder)
    with pytest.raises(KeyframeError, match="shape None"):
        create_intra_coder("raw_test").decode(b"xx", (4, 4))
    with pytest.raises(TypeError):
        register_intra_coder("not_a_coder")(int)


def _vp8l_header(width: int, height: int) -> bytes:
    """A RIFF/WebP lossless file header declaring ``width x height``, then junk."""
    bits = (width - 1) | (height - 1) << 14
    body = b"\x2f" + bits.to_bytes(4, "little") + bytes(64)
    chunk = b"VP8L" + len(body).to_bytes(4, "little") + body
    return b"RIFF" + (4 + len(chunk)).to_bytes(4, "little") + b"WEBP" + chunk


def test_webp_header_declaring_a_huge_picture_is_refused_before_decoding():
    coder = create_intra_coder("webp")
    with pytest.raises(KeyframeError, match="declares 8192x8192, expected 48x32"):
        coder.decode(_vp8l_header(8192, 8192), (48, 32))
    assert keyframes.webp_size(_vp8l_header(385, 289)) == (385, 289)


@pytest.mark.parametrize("name", ["hevc", "av1"])
def test_coded_picture_of_another_size_is_refused_from_its_header(name):
    big = np.random.default_rng(0).integers(0, 255, (256, 320, 3), dtype=np.uint8)
    data = create_intra_coder(name).encode(big, 30)
    with pytest.raises(KeyframeError, match="declares 320x256, expected 32x32"):
        create_intra_coder(name).decode(data, (32, 32))


@pytest.mark.parametrize("name", ["hevc", "webp"])
def test_every_corruption_of_a_keyframe_is_a_typed_error_or_a_picture(name, frame):
    coder = create_intra_coder(name)
    good = coder.encode(frame[:64, :96].copy(), 40)
    rng = np.random.default_rng(7)
    outcomes = set()
    for trial in range(60):
        data = bytearray(good)
        if trial % 3 == 0:
            data = data[: rng.integers(1, len(data))]
        for _ in range(1 + trial % 4):
            data[rng.integers(0, len(data))] ^= 1 << int(rng.integers(0, 8))
        try:
            picture = coder.decode(bytes(data), (96, 64))
        except KeyframeError:
            outcomes.add("error")
            continue
        assert picture.shape == (64, 96, 3) and picture.dtype == np.uint8
        outcomes.add("picture")
    assert "error" in outcomes


def test_av1_codes_narrow_tall_and_short_wide_pictures():
    """SVT-AV1 4.1 never returns from a picture with a side of 16-24 px and the other over
    64 (20x100 hung); the coder pads such a side to 28. Run in a child process with a
    deadline, so that a regression fails instead of hanging the suite."""
    import subprocess
    import sys

    code = ("import numpy as np\n"
            "from semcodec.codec.keyframes import create_intra_coder\n"
            "c = create_intra_coder('av1'); rng = np.random.default_rng(0)\n"
            "for w, h in ((20, 100), (100, 20), (16, 400), (24, 64)):\n"
            "    pic = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)\n"
            "    assert c.decode(c.encode(pic, 30), (w, h)).shape == (h, w, 3)\n"
            "print('ok')\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert "SVT [config]" not in done.stderr  # its set-up banner is off


@pytest.mark.parametrize("name", CODERS)
def test_coding_a_key_frame_leaves_the_threads_scheduling_as_it_was(name, frame):
    """SVT-AV1, run as root, switches the thread that opens an encoder to real-time
    SCHED_FIFO, which every process started from it afterwards inherits (the suite's servers
    starved the machine): the coder gives the thread its policy back, in the main thread and
    in a worker alike."""
    import os
    import threading

    if not hasattr(os, "sched_getscheduler"):
        pytest.skip("no POSIX scheduling on this platform")
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    create_intra_coder(name).encode(frame[:64, :64], 50)
    assert (os.sched_getscheduler(0), os.sched_getparam(0)) == (policy, param)
    seen = []

    def worker():
        create_intra_coder(name).encode(frame[:64, :64], 50)
        seen.append(os.sched_getscheduler(0))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [policy]


def test_the_scheduling_guard_undoes_a_change(monkeypatch):
    """Known answer without an encoder: a change made inside the guard is undone."""
    calls = []
    state = {"policy": 0}
    monkeypatch.setattr(keyframes.os, "sched_getscheduler", lambda pid: state["policy"],
                        raising=False)  # fmt: skip
    monkeypatch.setattr(keyframes.os, "sched_getparam", lambda pid: 0, raising=False)
    monkeypatch.setattr(keyframes.os, "sched_setscheduler",
                        lambda pid, policy, param: calls.append((pid, policy, param)),
                        raising=False)  # fmt: skip
    with keyframes.kept_scheduling():
        state["policy"] = 1  # what SVT-AV1 does as root
    assert calls == [(0, 0, 0)]
    calls.clear()
    with keyframes.kept_scheduling():
        pass
    assert calls == []
