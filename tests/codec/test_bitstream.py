"""The bitstream: byte layout, round trips, strict parsing, limits, atomic writes, fuzzing."""

from __future__ import annotations

import dataclasses
import io
import pickle
import struct
import tracemalloc
import zlib
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semcodec.codec.bitstream import (
    DEFAULT_MAX_UNIT_SIZE,
    FORMAT_VERSION,
    MAGIC,
    SYNC_MARKER,
    BitstreamError,
    CorruptError,
    ModelEntry,
    OversizedError,
    StreamHeader,
    StreamWriter,
    SubStream,
    SubStreamType,
    TruncatedError,
    Unit,
    UnitKind,
    UnsupportedVersionError,
    decode_uvarint,
    encode_uvarint,
    header_bytes,
    iter_units,
    read_stream,
    unit_overhead_bytes,
    unit_version,
    write_stream,
)
from semcodec.codec.bitstream.tables import SETTINGS_DEFAULTS

SHA = "0123456789abcdef" * 4
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _header(**kw) -> StreamHeader:
    args = dict(
        width=384,
        height=288,
        fps_num=30000,
        fps_den=1001,
        level=2,
        num_frames=3,
        models=(ModelEntry("ssdlite_person", SHA), ModelEntry("taef2")),
        settings={"keyframe_coder": "jpeg", "gop": "30", "ümlaut": "✓"},
    )
    args.update(kw)
    return StreamHeader(**args)


def _units() -> list[Unit]:
    return [
        Unit(
            UnitKind.KEYFRAME,
            0,
            (
                SubStream(SubStreamType.KEYFRAME_IMAGE, b"\xff\xd8jpeg" * 20),
                SubStream(SubStreamType.TRACKS, b"tracks"),
                SubStream(SubStreamType.METADATA, b""),
            ),
        ),
        Unit(UnitKind.FRAME, 1, (SubStream(SubStreamType.POSE, b"p" * 200),)),
        Unit(UnitKind.FRAME, 2, ()),
        Unit(UnitKind.END, 3),
    ]


def _frame_unit(content: bytes) -> bytes:
    """Frame arbitrary version-2 unit content (kind byte .. last payload byte) with a valid
    CRC."""
    raw_len = encode_uvarint(len(content) + 4)
    return SYNC_MARKER + raw_len + content + struct.pack(">I", zlib.crc32(raw_len + content))


def _frame_header(body: bytes, version: int = 2) -> bytes:
    covered = bytes([version]) + encode_uvarint(len(body)) + body
    return MAGIC + covered + struct.pack(">I", zlib.crc32(covered))


def _read_all(source, **kw):
    """(header, units read, error or None) -- units before an error are kept."""
    units: list[Unit] = []
    try:
        header, it = read_stream(source, **kw)
    except BitstreamError as exc:
        return None, units, exc
    try:
        for unit in it:
            units.append(unit)
    except BitstreamError as exc:
        return header, units, exc
    return header, units, None


# ------------------------------------------------------------------------------ uvarint


@pytest.mark.parametrize(
    "value, encoded",
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (16384, "808001"),
        (2**64 - 1, "ffffffffffffffffff01"),
    ],
)
def test_uvarint_known_answers(value, encoded):
    assert encode_uvarint(value).hex() == encoded
    assert decode_uvarint(bytes.fromhex("ee" + encoded), 1) == (value, 1 + len(encoded) // 2)


@pytest.mark.parametrize("value", [-1, 2**64, True, 1.0, "1"])
def test_uvarint_rejects_bad_values(value):
    with pytest.raises(BitstreamError):
        encode_uvarint(value)


@pytest.mark.parametrize(
    "data, error",
    [
        ("", TruncatedError),
        ("80", TruncatedError),
        ("ffff", TruncatedError),
        ("8000", CorruptError),  # overlong zero
        ("ff00", CorruptError),  # overlong 127
        ("ffffffffffffffffff02", CorruptError),  # 2**64
        ("ffffffffffffffffffff01", CorruptError),  # 11 bytes
    ],
)
def test_uvarint_decode_errors(data, error):
    with pytest.raises(error):
        decode_uvarint(bytes.fromhex(data))


@given(st.integers(0, 2**64 - 1))
@FUZZ
def test_uvarint_round_trip(value):
    raw = encode_uvarint(value)
    assert 1 <= len(raw) <= 10
    assert decode_uvarint(raw + b"\x00", 0) == (value, len(raw))


# ------------------------------------------------------------------------------ known answers


def test_unit_known_bytes():
    unit = Unit(UnitKind.FRAME, 3, (SubStream(SubStreamType.TRACKS, b"ab"),))
    expected = bytes.fromhex("a55a 0b 02 03 01 02 02 6162 62f4cf7f")
    assert unit.to_bytes(version=2) == expected
    assert Unit.from_bytes(expected) == unit
    assert unit_overhead_bytes(unit, 2) == len(expected) - 2 == 12
    compact = bytes.fromhex("e1 06 03 02 6162 8c4e")  # lead FRAME|1, length, seq, type, CRC-16
    assert unit.to_bytes(version=3) == compact and Unit.from_bytes(compact) == unit
    assert unit_overhead_bytes(unit, 3) == 6
    lead4 = bytes.fromhex("62 03 6162 ab")  # lead FRAME|TRACKS, length, CRC-8 over index 3 too
    assert unit.to_bytes() == lead4 and Unit.from_bytes(lead4, seq=3) == unit
    assert unit_overhead_bytes(unit) == 3
    assert [unit_version(b) for b in (lead4[0], compact[0], expected[0], 0)] == [4, 3, 2, None]


def test_lead4_frame_unit_index_is_its_position():
    """A version-4 frame unit does not write its index; its CRC checks the one the reader
    expects, so a unit out of place (one before it lost) is refused, never misread."""
    from semcodec.codec.bitstream.units import crc8

    assert crc8(b"123456789") == 0xF4  # CRC-8/SMBUS check value
    unit = Unit(UnitKind.FRAME, 3, (SubStream(SubStreamType.TRACKS, b"ab"),))
    raw = unit.to_bytes()
    with pytest.raises(BitstreamError, match="pass seq="):
        Unit.from_bytes(raw)
    with pytest.raises(CorruptError, match="index 4 .*missing"):
        Unit.from_bytes(raw, seq=4)
    key = Unit(UnitKind.KEYFRAME, 3, (SubStream(SubStreamType.KEYFRAME_IMAGE, b"k"),))
    assert Unit.from_bytes(key.to_bytes()) == key  # a keyframe carries its index
    with pytest.raises(CorruptError, match="carries index 3, expected 5"):
        Unit.from_bytes(key.to_bytes(), seq=5)
    units = [key.__class__(UnitKind.KEYFRAME, 0, key.substreams),
             Unit(UnitKind.FRAME, 1, unit.substreams), Unit(UnitKind.FRAME, 2, unit.substreams)]
    data = _header().to_bytes() + b"".join(u.to_bytes() for u in units)
    assert _read_all(data)[1] == units
    gap = _header().to_bytes() + units[0].to_bytes() + units[2].to_bytes()  # unit 1 lost
    header, got, error = _read_all(gap)
    assert got == units[:1] and isinstance(error, CorruptError) and error.unit_index == 1
    with pytest.raises(BitstreamError, match="seq 2: in a version-4 stream"):
        write_stream(io.BytesIO(), _header(), [units[0], units[2]])


@pytest.mark.parametrize("payload, crc", [(0, 1), (125, 1), (126, 1), (127, 2), (5000, 2)])
def test_lead4_crc_width_follows_the_length(payload, crc):
    """A unit whose length is one byte (under 128) has a CRC-8, a longer one a CRC-16."""
    unit = Unit(UnitKind.FRAME, 9, (SubStream(SubStreamType.FEATURES, b"x" * payload),))
    raw = unit.to_bytes()
    assert len(raw) == 1 + (1 if crc == 1 else 2 + (payload > 16000)) + payload + crc
    assert Unit.from_bytes(raw, seq=9) == unit
    if crc == 2 and payload < 200:  # 128 would be a 126-byte content with a CRC-16: refused
        bad = bytes([raw[0]]) + encode_uvarint(128) + b"x" * 126 + b"\x00\x00"
        with pytest.raises(CorruptError, match="1..127 or more than 128"):
            Unit.from_bytes(bad, seq=9)


def test_compact_unit_with_many_sub_streams_and_sizes():
    subs = tuple(SubStream(SubStreamType.PLATE_TILE, bytes([i]) * i) for i in range(20))
    unit = Unit(UnitKind.KEYFRAME, 300, subs)
    for version in (3, 4):
        raw = unit.to_bytes(version=version)
        lead = {3: 0xC0 | 1 << 4 | 15,  # the count escapes: 20 = 15 + 5
                4: 0x40 | 1 << 4}  # a count follows
        assert raw[0] == lead[version]
        assert Unit.from_bytes(raw) == unit and len(raw) == unit_overhead_bytes(
            unit, version) + sum(range(20))
        with pytest.raises(OversizedError, match="sub-streams"):
            Unit.from_bytes(raw, max_substreams=19)


def test_end_unit_known_bytes():
    assert Unit(UnitKind.END, 0).to_bytes(version=2) == bytes.fromhex("a55a 07 03 00 00 bed559fc")
    assert Unit(UnitKind.END, 0).to_bytes(version=3) == bytes.fromhex("f0 03 00 7a9d")
    assert Unit(UnitKind.END, 0).to_bytes() == bytes.fromhex("70 03 00 00 8f")  # seq, count


def test_header_known_bytes():
    header = StreamHeader(
        4, 2, 30, 1, level=1, num_frames=2,
        models=(ModelEntry("m", "00" * 32), ModelEntry("n")),
        settings={"k": "v"}, version=2,
    )  # fmt: skip
    expected = bytes.fromhex(
        "53454d43 02 3d"  # magic, version 2, body length 61
        "0004 0002 0000001e 00000001 01 00000002"  # 4x2, 30/1 fps, level 1, 2 frames
        "02 01 6d 20" + "00" * 32 + "01 6e 00"  # 2 models: "m" + digest, "n" without
        "01 01 6b 01 76"  # settings {"k": "v"}
        "990ee38c"  # CRC32 (zlib over version, length and body)
    )
    assert header.to_bytes() == expected
    assert StreamHeader.from_bytes(expected) == header
    assert header_bytes(header) == len(expected)


def test_compact_header_known_bytes():
    level1 = dict(SETTINGS_DEFAULTS[1])
    header = StreamHeader(
        384, 288, 7, 1, level=1, num_frames=60,
        models=(ModelEntry("ssdlite_person", "ab" * 32), ModelEntry("n")),
        settings={**level1, "target_bpp": "0.002", "zz": "1"}, defaults=2, version=3,
    )  # fmt: skip
    expected = bytes.fromhex(
        "53454d43 03 22"  # magic, version 3, body length 34
        "8003 a002 07 01 01 3c 02"  # 384 x 288, 7/1 fps, level 1, 60 frames, defaults 2
        "02 01 04 abababab 00 01 6e 00"  # ssdlite_person (id 1) + 4 digest bytes, "n" as text
        "02 18 05 302e303032 00 02 7a7a 01 31"  # 2 settings: target_bpp (id 24), "zz"
    )  # then the CRC32
    raw = header.to_bytes()
    assert raw[: len(expected)] == expected and len(raw) == len(expected) + 4
    assert raw[-4:] == struct.pack(">I", zlib.crc32(raw[4:-4]))
    parsed = StreamHeader.from_bytes(raw)
    assert parsed == header and dict(parsed.settings) == dict(header.settings)
    assert parsed.models[0].sha256 == "abababab" and parsed.models[0].matches("ab" * 32)
    assert not parsed.models[0].matches("ac" * 32) and parsed.version == 3
    v4 = dataclasses.replace(header, version=4).to_bytes()  # version 4: the same body
    assert v4[4] == FORMAT_VERSION == 4 and v4[5:-4] == raw[5:-4]


_F3 = b"\x04\x02\x1e\x01\x00\x00\x00"  # 4x2, 30/1 fps, level 0, 0 frames, no defaults


@pytest.mark.parametrize(
    "body, message",
    [
        (_F3 + b"\x00\x01\x00\x00\x00", "non-empty"),  # a settings key written as ""
        (_F3 + b"\x01\x63\x00", "past the table"),  # model id 99
        (_F3 + b"\x01\x00\x00\x00", "non-empty"),  # a model name written as ""
        (_F3 + b"\x01\x01\x01m\x00", "digest length"),
        (_F3 + b"\x02\x01\x00\x01\x00\x00", "twice"),
        (_F3[:-1] + b"\x09\x00\x00", "defaults id 9"),
        (b"\x00" + _F3[1:] + b"\x00\x00", "frame width"),
        (_F3 + b"\x00\x01\x00\x05level\x01\x31", "written as text"),
        (_F3[:-1] + b"\x01\x00\x01\x01\x01\x30", "repeats its default"),  # level=0
        (_F3 + b"\x00\x02\x02\x01\x31\x01\x01\x31", "increasing"),
        (_F3 + b"\x00\x00\x00", "more byte"),
        (_F3 + b"\x00", "runs past"),
    ],
)
def test_compact_header_errors_behind_a_valid_crc(body, message):
    with pytest.raises(CorruptError, match=message):
        StreamHeader.from_bytes(_frame_header(body, version=3))


def test_compact_header_rules():
    with pytest.raises(BitstreamError, match="lack"):  # a header naming defaults holds them all
        StreamHeader(4, 2, 30, settings={"level": "1"}, defaults=2)
    with pytest.raises(BitstreamError, match="version-3"):
        StreamHeader(4, 2, 30, settings=dict(SETTINGS_DEFAULTS[1]), defaults=2, version=2)
    with pytest.raises(BitstreamError, match="whole sha256"):
        StreamHeader(4, 2, 30, models=(ModelEntry("m", "abcd0123"),), version=2)
    with pytest.raises(BitstreamError, match="defaults 99"):
        StreamHeader(4, 2, 30, defaults=99)


# ------------------------------------------------------------------------------ round trips


def test_header_round_trip_and_normalisation():
    header = _header(models=[ModelEntry("a", SHA.upper())], settings={"z": "1", "a": ""})
    assert header.models == (ModelEntry("a", SHA[:8]),)  # version 3 keeps a prefix
    assert _header(models=[ModelEntry("a", SHA.upper())], version=2).models == (
        ModelEntry("a", SHA),)
    assert list(header.settings) == ["a", "z"]
    assert StreamHeader.from_bytes(header.to_bytes()) == header
    assert _header(fps_num=60, fps_den=2).frame_rate == 30
    assert header.frame_rate == Fraction(30000, 1001)
    assert pickle.loads(pickle.dumps(header)) == header
    assert hash(header) == hash(StreamHeader.from_bytes(header.to_bytes()))
    with pytest.raises(TypeError):
        header.settings["x"] = "y"  # type: ignore[index]


def test_minimal_header_round_trip():
    header = StreamHeader(1, 1, 1)
    assert StreamHeader.from_bytes(header.to_bytes()) == header


def test_units_round_trip_and_sizes():
    for unit in _units():
        raw = unit.to_bytes()
        assert Unit.from_bytes(raw, seq=unit.seq) == unit
        assert Unit.from_bytes(bytearray(raw), seq=unit.seq) == unit
        assert len(raw) == unit_overhead_bytes(unit) + unit.payload_bytes
    first = _units()[0]
    assert first.payload_sizes() == {
        SubStreamType.KEYFRAME_IMAGE: 120,
        SubStreamType.TRACKS: 6,
        SubStreamType.METADATA: 0,
    }


def test_large_payload_round_trip(tmp_path):
    big = bytes(range(256)) * (3 * 4096 + 7)  # ~3 MiB, more than one read chunk
    unit = Unit(UnitKind.FRAME, 2**40, (SubStream(SubStreamType.FEATURES, big),) * 2)
    assert Unit.from_bytes(unit.to_bytes(), seq=2**40) == unit
    path = tmp_path / "big.semc"
    units = [dataclasses.replace(unit, seq=0), dataclasses.replace(unit, seq=1)]
    write_stream(path, _header(), units)
    header, got, error = _read_all(path)
    assert error is None and got == units and header == _header()


def test_coercion_of_ints_to_enums():
    unit = Unit(2, 5, [SubStream(3, bytearray(b"x"))])
    assert unit.kind is UnitKind.FRAME and unit.substreams[0].type is SubStreamType.SEGMENTATION
    assert unit.substreams == (SubStream(SubStreamType.SEGMENTATION, b"x"),)


@pytest.mark.parametrize("kind", ["path", "bytes", "handle"])
def test_stream_round_trip(tmp_path, kind):
    header, units = _header(), _units()
    path = tmp_path / "s.semc"
    size = write_stream(path, header, units)
    data = path.read_bytes()
    assert size == len(data) == header_bytes(header) + sum(len(u.to_bytes()) for u in units)
    source = {"path": path, "bytes": data, "handle": io.BytesIO(data)}[kind]
    got_header, got_units, error = _read_all(source)
    assert error is None and got_header == header and got_units == units


def test_writer_to_handle_and_iter_units():
    buf = io.BytesIO()
    with StreamWriter(buf, _header()) as writer:
        sizes = [writer.write(u) for u in _units()]
    data = buf.getvalue()
    start = header_bytes(_header())
    got = list(iter_units(data, start))
    assert [u for u, _ in got] == _units()
    ends = [end for _, end in got]
    assert ends == [start + sum(sizes[: i + 1]) for i in range(len(sizes))]
    assert ends[-1] == len(data) == writer.bytes_written
    assert list(iter_units(data, len(data))) == []


def test_path_iterator_opens_lazily(tmp_path):
    path = tmp_path / "s.semc"
    write_stream(path, _header(), _units(), fsync=False)
    header, it = read_stream(path)
    path.unlink()  # header already read; the never-started iterator holds no open file
    assert header == _header()
    with pytest.raises(FileNotFoundError):
        next(it)


# ------------------------------------------------------------------------------ write validation


@pytest.mark.parametrize(
    "kw",
    [
        {"width": 0},
        {"height": 0},
        {"width": 70_000},
        {"width": 3.0},
        {"fps_num": 0},
        {"fps_den": 0},
        {"fps_num": 2**32},
        {"level": 256},
        {"level": -1},
        {"num_frames": -1},
        {"models": (ModelEntry("a"), ModelEntry("a"))},
        {"models": ("a",)},
        {"models": "abc"},
        {"settings": {"": "x"}},
        {"settings": {"k": 1}},
        {"settings": {1: "v"}},
        {"settings": {"k": "\ud800"}},
        {"settings": [("k", "v")]},
    ],
)
def test_header_validation(kw):
    with pytest.raises(BitstreamError):
        _header(**kw)


@pytest.mark.parametrize("sha", ["abc", "g" * 64, SHA + "0", 5])
def test_model_entry_validation(sha):
    with pytest.raises(BitstreamError):
        ModelEntry("m", sha)
    with pytest.raises(BitstreamError):
        ModelEntry("", None)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SubStream(99, b""),
        lambda: SubStream(0, b""),
        lambda: SubStream(UnitKind.FRAME, b""),  # an enum of the wrong kind
        lambda: SubStream(SubStreamType.POSE, "text"),
        lambda: Unit(9, 0),
        lambda: Unit(UnitKind.FRAME, -1),
        lambda: Unit(UnitKind.FRAME, 2**64),
        lambda: Unit(UnitKind.FRAME, 0, (b"x",)),
        lambda: Unit(UnitKind.FRAME, 0, SubStream(SubStreamType.POSE)),
    ],
)
def test_unit_validation(make):
    with pytest.raises(BitstreamError):
        make()


def test_write_limits():
    many = Unit(UnitKind.FRAME, 0, (SubStream(SubStreamType.FLOW),) * 65)
    with pytest.raises(OversizedError):
        many.to_bytes()
    assert len(many.to_bytes(max_substreams=65)) > 0
    unit = Unit(UnitKind.FRAME, 0, (SubStream(SubStreamType.FLOW, b"x" * 100),))
    with pytest.raises(OversizedError):
        unit.to_bytes(max_unit_size=100)
    with pytest.raises(OversizedError):
        _header(settings={"k": "v" * 2000}).to_bytes(max_header_size=1000)


def test_nothing_after_end():
    writer = StreamWriter(io.BytesIO(), _header())
    writer.write(Unit(UnitKind.END, 0))
    with pytest.raises(BitstreamError, match="END"):
        writer.write(Unit(UnitKind.FRAME, 1))
    writer.close()
    with pytest.raises(BitstreamError, match="closed"):
        writer.write(Unit(UnitKind.FRAME, 1))


# ------------------------------------------------------------------------------ atomic writes


def _failing_units():
    yield from _units()[:2]
    raise RuntimeError("encoder crashed")


def test_atomic_write_leaves_no_file(tmp_path):
    path = tmp_path / "out.semc"
    with pytest.raises(RuntimeError, match="encoder crashed"):
        write_stream(path, _header(), _failing_units())
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(BitstreamError):
        write_stream(path, _header(), [_units()[0], "not a unit"])  # type: ignore[list-item]
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "out.semc"
    write_stream(path, _header(), _units())
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        write_stream(path, _header(level=9), _failing_units())
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]
    with pytest.raises(BitstreamError):  # invalid header: rejected before any file exists
        write_stream(tmp_path / "other.semc", StreamHeader(1, 1, 1), [], max_header_size=3)
    assert list(tmp_path.iterdir()) == [path]


# ------------------------------------------------------------------------------ corruption


def _small_stream(version: int = FORMAT_VERSION) -> tuple[bytes, list[int]]:
    """A small stream and the offsets at which its units end."""
    header = StreamHeader(16, 8, 25, models=(ModelEntry("m", SHA),), settings={"a": "b"},
                          version=version)  # fmt: skip
    units = [
        Unit(UnitKind.KEYFRAME, 0, (SubStream(SubStreamType.KEYFRAME_IMAGE, b"img"),)),
        Unit(UnitKind.FRAME, 1, (SubStream(SubStreamType.TRACKS, b"t"), SubStream(5, b""))),
        Unit(UnitKind.END, 2),
    ]
    data = header.to_bytes()
    ends = []
    for unit in units:
        data += unit.to_bytes(version=version)
        ends.append(len(data))
    return data, ends


@pytest.mark.parametrize("version", [2, 3, 4])
def test_truncation_at_every_offset(tmp_path, version):
    data, ends = _small_stream(version)
    header_len = header_bytes(_small_stream_header(version))
    full = _read_all(data)[1]
    path = tmp_path / "cut.semc"
    for cut in range(len(data)):
        for source in (data[:cut], io.BytesIO(data[:cut])):
            header, units, error = _read_all(source)
            if cut < header_len:
                assert isinstance(error, TruncatedError), cut
                assert header is None
                continue
            complete = sum(end <= cut for end in ends)
            assert units == full[:complete], cut
            if cut in ends or cut == header_len:
                assert error is None, (cut, error)  # a clean stop at a unit boundary
            else:
                assert isinstance(error, TruncatedError), (cut, error)
                assert error.unit_index == complete and str(complete) in str(error)
    path.write_bytes(data[: ends[1] - 1])
    _, units, error = _read_all(path)
    assert units == full[:1] and isinstance(error, TruncatedError) and error.unit_index == 1


@pytest.mark.parametrize("version", [2, 3, 4])
def test_every_bit_flip_in_a_unit_is_caught(version):
    unit = Unit(UnitKind.FRAME, 300, (SubStream(SubStreamType.FLOW, b"flow!"), SubStream(7, b"")))
    raw = unit.to_bytes(version=version)
    for i in range(len(raw) * 8):
        bad = bytearray(raw)
        bad[i // 8] ^= 1 << (i % 8)
        with pytest.raises(BitstreamError) as info:
            Unit.from_bytes(bytes(bad), seq=300)
        if i // 8 >= (2 if version == 4 else 3):  # past the marker and the length: the CRC
            assert isinstance(info.value, CorruptError), (i, info.value)
        assert info.value.offset is not None


@pytest.mark.parametrize("version", [2, 3, 4])
def test_every_bit_flip_in_a_stream_is_caught(version):
    data, _ = _small_stream(version)
    full = _read_all(data)[1]
    for i in range(len(data) * 8):
        bad = bytearray(data)
        bad[i // 8] ^= 1 << (i % 8)
        header, units, error = _read_all(bytes(bad))
        assert isinstance(error, BitstreamError), i
        assert units == full[: len(units)], i  # never a silently wrong unit


def test_bad_magic_and_marker_messages():
    with pytest.raises(CorruptError, match="magic.*53454d43.*found 52494646"):
        read_stream(b"RIFF....")
    with pytest.raises(TruncatedError, match="magic"):
        read_stream(b"SEM")
    with pytest.raises(CorruptError, match="a55a.*c0..ff.*40..7f.*found 00") as info:
        Unit.from_bytes(b"\x00\x00\x07")
    assert info.value.offset == 0 and info.value.unit_index == 0
    with pytest.raises(TruncatedError):
        Unit.from_bytes(b"")
    with pytest.raises(TruncatedError):
        Unit.from_bytes(b"\xa5")
    with pytest.raises(CorruptError, match="version-4 unit, found a5"):  # framings never mix
        list(read_stream(_header().to_bytes() + _units()[1].to_bytes(version=2))[1])
    with pytest.raises(CorruptError, match="version-2 unit, found e1"):
        list(read_stream(_header(version=2).to_bytes() + _units()[1].to_bytes(version=3))[1])
    with pytest.raises(CorruptError, match="version-3 unit, found 50"):
        list(read_stream(_header(version=3).to_bytes() + _units()[0].to_bytes())[1])


def test_trailing_bytes_refused():
    raw = _units()[1].to_bytes()
    with pytest.raises(CorruptError, match="1 more byte"):
        Unit.from_bytes(raw + b"\x00", seq=1)
    with pytest.raises(CorruptError, match="more byte"):
        StreamHeader.from_bytes(_header().to_bytes() + b"\xa5")
    data = _header().to_bytes() + Unit(UnitKind.END, 0).to_bytes() + raw
    _, units, error = _read_all(data)
    assert units == [Unit(UnitKind.END, 0)]
    assert isinstance(error, CorruptError) and "END" in str(error)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\x00\x00\x00", "unit kind"),
        (b"\x09\x00\x00", "unit kind"),
        (b"\x02\x00\x01\x00\x00", "type"),
        (b"\x02\x00\x01\x0b\x00", "type"),
        (b"\x02\x00\x01\x02\x05ab", "payload"),  # payload runs past the unit
        (b"\x02\x00\x00\x00", "more byte"),  # trailing byte before the CRC
        (b"\x02\x80\x00\x00", "non-canonical"),  # overlong seq
        (b"\x02\x00\x01\x02", "length"),  # sub-stream length missing
        (b"\x02\xff\xff\xff", "varint runs past"),
    ],
)
def test_structural_errors_behind_a_valid_crc(content, message):
    with pytest.raises(CorruptError, match=message):
        Unit.from_bytes(_frame_unit(content))


def test_unit_length_errors():
    with pytest.raises(CorruptError, match=">= 7"):
        Unit.from_bytes(SYNC_MARKER + b"\x03" + b"\x00" * 3)
    with pytest.raises(CorruptError, match="non-canonical"):
        Unit.from_bytes(SYNC_MARKER + b"\x87\x00" + b"\x00" * 7)


def _fixed(w=4, h=2, num=30, den=1) -> bytes:
    return struct.pack(">HHIIBI", w, h, num, den, 0, 0)


@pytest.mark.parametrize(
    "body, message",
    [
        (_fixed(w=0) + b"\x00\x00", "width"),
        (_fixed(h=0) + b"\x00\x00", "height"),
        (_fixed(num=0) + b"\x00\x00", "numerator"),
        (_fixed(den=0) + b"\x00\x00", "denominator"),
        (_fixed() + b"\x01\x01m\x05abcde\x00", "digest length"),
        (_fixed() + b"\x01\x00\x00\x00", "non-empty name"),
        (_fixed() + b"\x02\x01m\x00\x01m\x00\x00", "twice"),
        (_fixed() + b"\x00\x02\x01b\x00\x01a\x00", "increasing"),
        (_fixed() + b"\x00\x02\x01a\x00\x01a\x00", "increasing"),
        (_fixed() + b"\x00\x01\x01\xff\x00", "UTF-8"),
        (_fixed() + b"\x00\x01\x00\x00", "non-empty key"),
        (_fixed() + b"\x00\x00\x00", "more byte"),
        (_fixed() + b"\x00", "runs past"),
        (_fixed()[:-1], "expected 17 bytes"),
    ],
)
def test_header_errors_behind_a_valid_crc(body, message):
    with pytest.raises(CorruptError, match=message):
        StreamHeader.from_bytes(_frame_header(body))


def test_header_crc_and_truncation():
    raw = bytearray(_header().to_bytes())
    raw[10] ^= 0x40
    with pytest.raises(CorruptError, match="CRC mismatch"):
        StreamHeader.from_bytes(bytes(raw))
    for cut in range(len(raw)):
        with pytest.raises(TruncatedError):
            StreamHeader.from_bytes(_header().to_bytes()[:cut])


@pytest.mark.parametrize("version", [0, 1, 5, 255])
def test_other_versions_refused(version):
    data = _frame_header(_fixed() + b"\x00\x00", version=version)
    message = f"version {version} .*versions 2, 3, 4"
    with pytest.raises(UnsupportedVersionError, match=message) as info:
        read_stream(data)
    assert info.value.offset == 4
    if version > FORMAT_VERSION:
        assert "upgrade" in str(info.value)
    assert StreamHeader.from_bytes(_frame_header(_fixed() + b"\x00\x00")).width == 4


# ------------------------------------------------------------------------------ limits


def test_oversized_unit_refused_before_reading():
    huge = SYNC_MARKER + encode_uvarint(2**40) + b"\x02\x00\x00"
    with pytest.raises(OversizedError, match=str(2**40)) as info:
        Unit.from_bytes(huge)
    assert info.value.offset == 2
    with pytest.raises(OversizedError):
        Unit.from_bytes(_units()[1].to_bytes(), seq=1, max_unit_size=50)
    assert Unit.from_bytes(_units()[1].to_bytes(), seq=1, max_unit_size=250) == _units()[1]


def test_declared_length_never_allocated():
    """A length just under the limit over a few real bytes costs memory for the bytes only."""
    data = (_header(version=2).to_bytes() + SYNC_MARKER + encode_uvarint(DEFAULT_MAX_UNIT_SIZE)
            + b"\x02")
    tracemalloc.start()
    try:
        _, units, error = _read_all(io.BytesIO(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(error, TruncatedError) and "expected 67108864 bytes" in str(error)
    assert peak < 4 * 1024 * 1024


def test_limits_hold_when_reading_a_file_on_disk(tmp_path):
    """read_stream(path) reads a real file in bounded chunks, with the same limits as bytes."""
    path = tmp_path / "hostile.semc"
    path.write_bytes(
        _header(version=2).to_bytes() + SYNC_MARKER
        + encode_uvarint(DEFAULT_MAX_UNIT_SIZE) + b"\x02"
    )
    tracemalloc.start()
    try:
        _, units = read_stream(path)
        with pytest.raises(TruncatedError, match="expected 67108864 bytes"):
            list(units)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024
    path.write_bytes(_header(version=2).to_bytes() + SYNC_MARKER + encode_uvarint(2**40) + b"\x02")
    with pytest.raises(OversizedError, match="max_unit_size"):
        list(read_stream(path)[1])
    good = _header().to_bytes() + b"".join(u.to_bytes() for u in _units())
    path.write_bytes(good)
    with pytest.raises(OversizedError, match="max_unit_size"):
        list(read_stream(path, max_unit_size=50)[1])
    with pytest.raises(OversizedError, match="sub-streams"):
        list(read_stream(path, max_substreams=2)[1])
    with pytest.raises(OversizedError, match="max_header_size"):
        read_stream(path, max_header_size=20)
    path.write_bytes(MAGIC + bytes([FORMAT_VERSION]) + encode_uvarint(2 * 1024 * 1024) + bytes(100))
    with pytest.raises(OversizedError, match="max_header_size"):
        read_stream(path)


def test_oversized_substream_count_and_header():
    with pytest.raises(OversizedError, match="1000 sub-streams"):
        Unit.from_bytes(_frame_unit(b"\x02\x00" + encode_uvarint(1000)))
    with pytest.raises(OversizedError, match="3 sub-streams"):
        Unit.from_bytes(_units()[0].to_bytes(), max_substreams=2)
    big = MAGIC + bytes([FORMAT_VERSION]) + encode_uvarint(2 * 1024 * 1024)
    with pytest.raises(OversizedError, match="max_header_size"):
        read_stream(big)
    with pytest.raises(OversizedError):
        read_stream(_header().to_bytes(), max_header_size=20)


def test_error_type_hierarchy():
    for cls in (TruncatedError, CorruptError, UnsupportedVersionError, OversizedError):
        assert issubclass(cls, BitstreamError) and issubclass(cls, ValueError)


# ------------------------------------------------------------------------------ fuzzing


def _parse_everything(data: bytes) -> None:
    for parse in (Unit.from_bytes, StreamHeader.from_bytes, _read_all, decode_uvarint):
        try:
            result = parse(data)
        except BitstreamError:
            continue
        if isinstance(result, StreamHeader):
            assert result.to_bytes() == data  # only canonical encodings are accepted
        elif isinstance(result, Unit):
            assert result.to_bytes(version=unit_version(data[0])) == data
        elif isinstance(result, tuple) and len(result) == 3 and result[2] is not None:
            assert isinstance(result[2], BitstreamError)
    try:
        for unit, end in iter_units(data):
            assert end <= len(data) and isinstance(unit, Unit)
    except BitstreamError:
        pass


@given(st.binary(max_size=300))
@FUZZ
def test_fuzz_random_bytes(data):
    _parse_everything(data)
    _parse_everything(MAGIC + bytes([FORMAT_VERSION]) + data)
    _parse_everything(SYNC_MARKER + data)
    _parse_everything(MAGIC + bytes([2]) + data)
    _parse_everything(bytes([0xE1]) + data)
    _parse_everything(bytes([0x62]) + data)


@given(st.binary(max_size=120))
@FUZZ
def test_fuzz_unit_contents_behind_valid_crc(content):
    raw = _frame_unit(content)
    try:
        unit = Unit.from_bytes(raw)
    except BitstreamError:
        return
    assert unit.to_bytes(version=2) == raw


@given(st.binary(max_size=120), st.integers(0, 255))
@FUZZ
def test_fuzz_compact_unit_contents_behind_valid_crc(content, lead):
    from semcodec.codec.bitstream.units import crc16

    covered = bytes([lead | 0xC0]) + encode_uvarint(len(content) + 2) + content
    raw = covered + struct.pack(">H", crc16(covered))
    try:
        unit = Unit.from_bytes(raw)
    except BitstreamError:
        return
    assert unit.to_bytes(version=3) == raw


@given(st.binary(max_size=200), st.integers(0, 255), st.integers(0, 300))
@FUZZ
def test_fuzz_lead4_unit_contents_behind_valid_crc(content, lead, seq):
    from semcodec.codec.bitstream.units import crc8, crc16

    lead = lead & 0x3F | 0x40
    implied = encode_uvarint(seq) if lead >> 4 & 3 == UnitKind.FRAME else b""
    short = len(content) + 1 < 128
    covered = bytes([lead]) + encode_uvarint(len(content) + (1 if short else 2)) + content
    raw = covered + (bytes([crc8(covered, crc8(implied))]) if short else
                     struct.pack(">H", crc16(covered, crc16(implied))))  # fmt: skip
    try:
        unit = Unit.from_bytes(raw, seq=seq)
    except BitstreamError:
        return
    assert unit.to_bytes() == raw and unit.seq == seq


@given(st.binary(max_size=120))
@FUZZ
def test_fuzz_compact_header_bodies_behind_valid_crc(body):
    raw = _frame_header(b"\x04\x02\x1e\x01\x01\x00" + body, version=3)
    try:
        header = StreamHeader.from_bytes(raw)
    except BitstreamError:
        return
    assert header.to_bytes() == raw


@given(st.binary(max_size=120))
@FUZZ
def test_fuzz_header_bodies_behind_valid_crc(body):
    raw = _frame_header(_fixed() + body)
    try:
        header = StreamHeader.from_bytes(raw)
    except BitstreamError:
        return
    assert header.to_bytes() == raw


@given(st.data(), st.sampled_from([2, 3, 4]))
@FUZZ
def test_fuzz_mutated_streams(data, version):
    stream, _ = _small_stream(version)
    bad = bytearray(stream)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["set", "insert", "delete"]))
        pos = data.draw(st.integers(0, max(0, len(bad) - 1)))
        if op == "set":
            bad[pos] = data.draw(st.integers(0, 255))
        elif op == "insert":
            bad[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
        elif bad:
            del bad[pos : pos + data.draw(st.integers(1, 8))]
    header, units, error = _read_all(bytes(bad))
    assert error is None or isinstance(error, BitstreamError)
    rebuilt = b""
    if header is not None:
        rebuilt = header.to_bytes() + b"".join(u.to_bytes(version=header.version) for u in units)
        assert bytes(bad).startswith(rebuilt)  # what was returned is exactly what was there
    if error is None:  # a clean read (e.g. whole units cut off the end) is exact
        assert rebuilt == bytes(bad)


def _small_stream_header(version: int = FORMAT_VERSION) -> StreamHeader:
    return read_stream(_small_stream(version)[0])[0]


_text = st.text(max_size=12)
_models = st.lists(
    st.builds(ModelEntry, st.text(min_size=1, max_size=12), st.none() | st.just(SHA)),
    max_size=3,
    unique_by=lambda m: m.name,
)
_headers = st.builds(
    StreamHeader,
    width=st.integers(1, 65535),
    height=st.integers(1, 65535),
    fps_num=st.integers(1, 2**32 - 1),
    fps_den=st.integers(1, 2**32 - 1),
    level=st.integers(0, 255),
    num_frames=st.integers(0, 2**32 - 1),
    models=_models,
    settings=st.dictionaries(st.text(min_size=1, max_size=12), _text, max_size=4),
    version=st.sampled_from([2, 3, 4]),
)
_substreams = st.builds(SubStream, st.sampled_from(SubStreamType), st.binary(max_size=64))
_unit_strategy = st.builds(
    Unit,
    st.sampled_from(UnitKind),
    st.integers(0, 2**64 - 1),
    st.lists(_substreams, max_size=5).map(tuple),
)


@given(_headers, st.lists(_unit_strategy, max_size=4))
@FUZZ
def test_round_trip_property(header, units):
    assert StreamHeader.from_bytes(header.to_bytes()) == header
    for unit in units:
        for version in (2, 3, 4):
            raw = unit.to_bytes(version=version)
            assert Unit.from_bytes(raw, seq=unit.seq) == unit
            assert len(raw) == unit_overhead_bytes(unit, version) + unit.payload_bytes
    units = [dataclasses.replace(u, seq=i) for i, u in enumerate(
        u for u in units if u.kind != UnitKind.END)]  # in a stream, a unit's seq is its place
    buf = io.BytesIO()
    write_stream(buf, header, units)
    got_header, got_units, error = _read_all(buf.getvalue())
    assert error is None and got_header == header and got_units == units


class _Trickle(io.RawIOBase):
    """A raw, unseekable reader that returns at most 3 bytes per read (like a pipe)."""

    def __init__(self, data: bytes) -> None:
        self._buf = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        chunk = self._buf.read(min(3, len(b)))
        b[: len(chunk)] = chunk
        return len(chunk)


def test_short_reads_from_raw_handles():
    data, _ = _small_stream()
    header, units, error = _read_all(_Trickle(data))
    assert error is None and (header, units) == _read_all(data)[:2]
