"""The stream header: :class:`StreamHeader` (frame size and rate, level, frame count, model
names with their sha256, settings), its canonical bytes and its strict parser, in format
version 3 (compact: numbers as varints, names and keys from :mod:`.tables`, settings as
changes from a numbered set of defaults) and version 2 (read, and written on request). The
layouts are in :mod:`codec.bitstream`."""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from semcodec.codec.bitstream.primitives import (
    _CRC,
    _HEADER_FIXED,
    _SHA256_BYTES,
    _U16_MAX,
    _U32_MAX,
    DEFAULT_MAX_HEADER_SIZE,
    FORMAT_VERSION,
    MAGIC,
    SUPPORTED_VERSIONS,
    BitstreamError,
    CorruptError,
    OversizedError,
    TruncatedError,
    UnsupportedVersionError,
    _check_int,
    _check_limit,
    _Cursor,
    _Input,
    _utf8,
    encode_uvarint,
)
from semcodec.codec.bitstream.tables import (
    DIGEST_PREFIX_BYTES,
    MODEL_NAMES,
    SETTING_KEYS,
    settings_defaults,
)

_SETTING_IDS = {key: i + 1 for i, key in enumerate(SETTING_KEYS)}
_MODEL_IDS = {name: i + 1 for i, name in enumerate(MODEL_NAMES)}


@dataclass(frozen=True)
class ModelEntry:
    """A model the stream was made with: its registry name and the sha256 of its file.

    Attributes:
        name: registry name (non-empty).
        sha256: 64 hex characters (stored lowercase); in a version-3 header its first
            ``2 * DIGEST_PREFIX_BYTES`` characters (:meth:`matches` compares either with a
            file's sha256); or ``None`` for a model whose file is not byte-reproducible.
    """

    name: str
    sha256: str | None = None

    def __post_init__(self) -> None:
        _utf8("model name", self.name, allow_empty=False)
        if self.sha256 is None:
            return
        digest = self.sha256
        if not isinstance(digest, str) or len(digest) not in (2 * _SHA256_BYTES,
                                                              2 * DIGEST_PREFIX_BYTES):
            raise BitstreamError(
                f"model {self.name!r}: sha256 must be 64 hex characters (or the "
                f"{2 * DIGEST_PREFIX_BYTES} first), or None, got {digest!r}"
            )
        try:
            bytes.fromhex(digest)
        except ValueError:
            raise BitstreamError(
                f"model {self.name!r}: sha256 {digest!r} is not hexadecimal"
            ) from None
        object.__setattr__(self, "sha256", digest.lower())

    def matches(self, sha256: str | None) -> bool:
        """Whether a file of sha256 ``sha256`` (64 hex characters) is this model's: equal to
        the digest held, or starting with it where only its prefix is held."""
        if self.sha256 is None or sha256 is None:
            return self.sha256 == sha256
        return sha256.lower().startswith(self.sha256)

    def compact(self) -> ModelEntry:
        """The entry as a version-3 header holds it (the digest's prefix only)."""
        if self.sha256 is None or len(self.sha256) == 2 * DIGEST_PREFIX_BYTES:
            return self
        return ModelEntry(self.name, self.sha256[: 2 * DIGEST_PREFIX_BYTES])


@dataclass(frozen=True)
class StreamHeader:
    """What a decoder needs to know before the first unit.

    Attributes:
        width, height: frame size in pixels, 1..65535.
        fps_num, fps_den: frame rate as the rational ``fps_num / fps_den``, each 1..2**32-1.
        level: operating level of the codec (what is sent), 0..255.
        num_frames: number of frames if known, else 0; 0..2**32-1.
        models: the models the edge used, in order (a version-3 header keeps the first
            :data:`~.tables.DIGEST_PREFIX_BYTES` of each sha256: compare with
            :meth:`ModelEntry.matches`).
        settings: free-form string key/value settings (codec settings, keyframe coder...);
            read-only, kept sorted by key. Keys are non-empty. All of them, also those a
            version-3 header leaves to its ``defaults``.
        defaults: version 3: the id of the set of default settings
            (:data:`~.tables.SETTINGS_DEFAULTS`, 0 for none) whose entries the bytes leave
            out where ``settings`` agree; ``settings`` must hold every key of the set.
        version: the format version the header (and its stream's units) are written in:
            :data:`FORMAT_VERSION` (4), or 3 or 2 to write an older layout.
    """

    width: int
    height: int
    fps_num: int
    fps_den: int = 1
    level: int = 0
    num_frames: int = 0
    models: tuple[ModelEntry, ...] = ()
    settings: Mapping[str, str] = field(default_factory=dict)
    defaults: int = 0
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version not in SUPPORTED_VERSIONS:
            raise BitstreamError(f"version must be one of {SUPPORTED_VERSIONS}, got "
                                 f"{self.version!r}")  # fmt: skip
        _check_int("width", self.width, 1, _U16_MAX)
        _check_int("height", self.height, 1, _U16_MAX)
        _check_int("fps_num", self.fps_num, 1, _U32_MAX)
        _check_int("fps_den", self.fps_den, 1, _U32_MAX)
        _check_int("level", self.level, 0, 255)
        _check_int("num_frames", self.num_frames, 0, _U32_MAX)
        if isinstance(self.models, (str, bytes)) or not isinstance(self.models, Iterable):
            raise BitstreamError(f"models must be a sequence of ModelEntry, got {self.models!r}")
        models = tuple(self.models)
        seen: set[str] = set()
        for entry in models:
            if not isinstance(entry, ModelEntry):
                raise BitstreamError(f"models must hold ModelEntry objects, got {entry!r}")
            if entry.name in seen:
                raise BitstreamError(f"model {entry.name!r} is listed twice")
            seen.add(entry.name)
        if not isinstance(self.settings, Mapping):
            raise BitstreamError(f"settings must be a mapping of str to str, got {self.settings!r}")
        for key, value in self.settings.items():
            _utf8("settings key", key, allow_empty=False)
            _utf8(f"settings[{key!r}]", value, allow_empty=True)
        settings = MappingProxyType(dict(sorted(self.settings.items())))
        self._check_defaults(settings)
        if self.version == 2 and any(m.sha256 and len(m.sha256) != 2 * _SHA256_BYTES
                                     for m in models):  # fmt: skip
            raise BitstreamError("a version-2 header holds whole sha256 digests (64 hex "
                                 "characters)")  # fmt: skip
        if self.version >= 3:
            models = tuple(m.compact() for m in models)
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "settings", settings)

    def _check_defaults(self, settings: Mapping[str, str]) -> None:
        _check_int("defaults", self.defaults, 0, 255)
        if self.defaults and self.version < 3:
            raise BitstreamError("defaults are a version-3 header's: a version-2 header "
                                 "writes every setting (give defaults=0)")  # fmt: skip
        try:
            table = settings_defaults(self.defaults)
        except KeyError:
            raise BitstreamError(f"defaults {self.defaults}: no such set of default settings "
                                 "(tables.SETTINGS_DEFAULTS)") from None  # fmt: skip
        missing = sorted(set(table) - set(settings))
        if missing:
            raise BitstreamError(f"settings lack {missing}, keys of the defaults they name "
                                 f"({self.defaults}): give them, or defaults=0")  # fmt: skip

    def _fields(self) -> tuple[Any, ...]:
        """Every field in order, settings as a plain dict."""
        return (self.width, self.height, self.fps_num, self.fps_den, self.level,
                self.num_frames, self.models, dict(self.settings), self.defaults,
                self.version)  # fmt: skip

    def __hash__(self) -> int:
        fields = self._fields()
        return hash((*fields[:7], tuple(fields[7].items()), *fields[8:]))

    def __reduce__(self) -> tuple[Any, ...]:  # a mappingproxy does not pickle; a dict does
        return (type(self), self._fields())

    @property
    def frame_rate(self) -> Fraction:
        """Frames per second as an exact fraction."""
        return Fraction(self.fps_num, self.fps_den)

    def _body(self) -> bytes:
        return self._body_v3() if self.version >= 3 else self._body_v2()

    def _body_v3(self) -> bytes:
        parts = [encode_uvarint(v) for v in (self.width, self.height, self.fps_num,
                                              self.fps_den)]  # fmt: skip
        parts += [bytes([self.level]), encode_uvarint(self.num_frames),
                  encode_uvarint(self.defaults), encode_uvarint(len(self.models))]  # fmt: skip
        for entry in self.models:
            digest = b"" if entry.sha256 is None else bytes.fromhex(entry.sha256)
            parts += [_named(entry.name, _MODEL_IDS), bytes([len(digest)]), digest]
        table = settings_defaults(self.defaults)
        written = {k: v for k, v in self.settings.items() if table.get(k) != v}
        parts.append(encode_uvarint(len(written)))
        for key, value in written.items():
            v = value.encode("utf-8")
            parts += [_named(key, _SETTING_IDS), encode_uvarint(len(v)), v]
        return b"".join(parts)

    def _body_v2(self) -> bytes:
        parts = [
            _HEADER_FIXED.pack(
                self.width, self.height, self.fps_num, self.fps_den, self.level, self.num_frames
            ),
            encode_uvarint(len(self.models)),
        ]
        for entry in self.models:
            name = entry.name.encode("utf-8")
            digest = b"" if entry.sha256 is None else bytes.fromhex(entry.sha256)
            parts += [encode_uvarint(len(name)), name, bytes([len(digest)]), digest]
        parts.append(encode_uvarint(len(self.settings)))
        for key, value in self.settings.items():
            k, v = key.encode("utf-8"), value.encode("utf-8")
            parts += [encode_uvarint(len(k)), k, encode_uvarint(len(v)), v]
        return b"".join(parts)

    def to_bytes(self, *, max_header_size: int = DEFAULT_MAX_HEADER_SIZE) -> bytes:
        """The encoded header (magic through CRC).

        Raises:
            OversizedError: the body is longer than ``max_header_size``.
        """
        _check_limit("max_header_size", max_header_size)
        body = self._body()
        if len(body) > max_header_size:
            raise OversizedError(
                f"header body is {len(body)} bytes, over the limit of {max_header_size}"
            )
        covered = bytes([self.version]) + encode_uvarint(len(body)) + body
        return MAGIC + covered + _CRC.pack(zlib.crc32(covered))

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
    ) -> StreamHeader:
        """Parse exactly one encoded header (no trailing bytes)."""
        inp = _Input(io.BytesIO(bytes(data)))
        header = _read_header(inp, _check_limit("max_header_size", max_header_size))
        if inp.pos != len(data):
            raise CorruptError(
                f"expected the end of the data after the stream header, found "
                f"{len(data) - inp.pos} more byte(s)",
                offset=inp.pos,
            )
        return header


def _read_header(inp: _Input, max_header_size: int) -> StreamHeader:
    start = inp.pos
    magic = inp.read_upto(len(MAGIC))
    if magic != MAGIC[: len(magic)]:
        raise CorruptError(
            f"not a semcodec stream: expected magic {MAGIC!r} ({MAGIC.hex()}), found {magic.hex()}",
            offset=start,
        )
    if len(magic) < len(MAGIC):
        raise TruncatedError(
            f"stream header: expected the {len(MAGIC)}-byte magic {MAGIC!r}, the data ends "
            f"after {len(magic)} byte(s)",
            offset=inp.pos,
        )
    raw_version = inp.read_upto(1)
    if not raw_version:
        raise TruncatedError(
            "stream header: expected the format version byte, the data ends", offset=inp.pos
        )
    version = raw_version[0]
    if version not in SUPPORTED_VERSIONS:
        hint = (
            "; the stream was written by a newer semcodec: upgrade to read it"
            if version > FORMAT_VERSION
            else ""
        )
        raise UnsupportedVersionError(
            f"stream format version {version} is not supported: this reader reads versions "
            f"{', '.join(map(str, SUPPORTED_VERSIONS))}{hint}",
            offset=inp.pos - 1,
        )
    length_offset = inp.pos
    length, raw_length = inp.read_uvarint("stream header length", None)
    if length > max_header_size:
        raise OversizedError(
            f"stream header declares a {length}-byte body, over the limit of "
            f"{max_header_size} (max_header_size)",
            offset=length_offset,
        )
    body_offset = inp.pos
    body = inp.read_upto(length)
    if len(body) < length:
        raise TruncatedError(
            f"stream header: expected a {length}-byte body, the data ends after {len(body)}",
            offset=inp.pos,
        )
    raw_crc = inp.read_upto(4)
    if len(raw_crc) < 4:
        raise TruncatedError(
            f"stream header: expected a 4-byte CRC, the data ends after {len(raw_crc)}",
            offset=inp.pos,
        )
    stored = _CRC.unpack(raw_crc)[0]
    computed = zlib.crc32(body, zlib.crc32(raw_version + raw_length))
    if stored != computed:
        raise CorruptError(
            f"stream header CRC mismatch: stored {stored:08x}, computed {computed:08x}",
            offset=inp.pos - 4,
        )
    if version >= 3:
        return _parse_header_body_v3(body, body_offset, version)
    return _parse_header_body(body, body_offset)


def _named(name: str, ids: dict[str, int]) -> bytes:
    """A name a table numbers as its uvarint id, any other as 0 and its text."""
    if name in ids:
        return encode_uvarint(ids[name])
    raw = name.encode("utf-8")
    return b"\x00" + encode_uvarint(len(raw)) + raw


def _read_named(cur: _Cursor, table: tuple[str, ...], what: str) -> str:
    """Inverse of :func:`_named`: the table's entry, or a name written as text (which must
    be non-empty and not one the table numbers: the encoding is canonical)."""
    offset = cur.offset
    ident = cur.uvarint(f"{what} id")
    if ident > len(table):
        raise cur.corrupt(f"{what} id {ident} is past the table of {len(table)} (a stream of "
                          "a newer semcodec: upgrade to read it)", offset=offset)  # fmt: skip
    if ident:
        return table[ident - 1]
    name = cur.text(what)
    if not name:
        raise cur.corrupt(f"{what}: expected a non-empty name", offset=offset)
    if name in table:
        raise cur.corrupt(f"{what} {name!r} is written as text, but the table numbers it "
                          f"({table.index(name) + 1}): non-canonical", offset=offset)  # fmt: skip
    return name


def _parse_header_body_v3(body: bytes, base: int, version: int) -> StreamHeader:
    cur = _Cursor(body, base, None, "stream header body")
    fields = {}
    for name, hi in (("frame width", _U16_MAX), ("frame height", _U16_MAX),
                     ("frame rate numerator", _U32_MAX), ("frame rate denominator", _U32_MAX)):
        offset = cur.offset
        fields[name] = cur.uvarint(name)
        if not 1 <= fields[name] <= hi:
            raise cur.corrupt(f"{name}: expected 1..{hi}, found {fields[name]}", offset=offset)
    level = cur.u8("level")
    offset = cur.offset
    num_frames = cur.uvarint("number of frames")
    if num_frames > _U32_MAX:
        raise cur.corrupt(f"number of frames: expected <= {_U32_MAX}, found {num_frames}",
                          offset=offset)  # fmt: skip
    offset = cur.offset
    defaults = cur.uvarint("defaults id")
    try:
        table = settings_defaults(defaults)
    except KeyError:
        raise cur.corrupt(f"defaults id {defaults} names no set of default settings (a stream "
                          "of a newer semcodec: upgrade to read it)", offset=offset) from None
    models: list[ModelEntry] = []
    for i in range(cur.uvarint("model count")):
        offset = cur.offset
        name = _read_named(cur, MODEL_NAMES, f"model #{i} name")
        if any(m.name == name for m in models):
            raise cur.corrupt(f"model {name!r} is listed twice", offset=offset)
        offset = cur.offset
        size = cur.u8(f"model {name!r} digest length")
        if size not in (0, DIGEST_PREFIX_BYTES):
            raise cur.corrupt(f"model {name!r} digest length: expected 0 or "
                              f"{DIGEST_PREFIX_BYTES}, found {size}", offset=offset)  # fmt: skip
        digest = cur.take(size, f"model {name!r} digest")
        models.append(ModelEntry(name, digest.hex() if digest else None))
    settings = dict(table)
    previous: str | None = None
    for i in range(cur.uvarint("settings count")):
        offset = cur.offset
        key = _read_named(cur, SETTING_KEYS, f"settings key #{i}")
        if previous is not None and key <= previous:
            raise cur.corrupt(f"settings key {key!r}: expected keys in strictly increasing "
                              f"order, found it after {previous!r}", offset=offset)  # fmt: skip
        value = cur.text(f"settings[{key!r}]")
        if table.get(key) == value:
            raise cur.corrupt(f"settings[{key!r}] = {value!r} repeats its default: "
                              "non-canonical", offset=offset)  # fmt: skip
        settings[key], previous = value, key
    if cur.remaining:
        raise cur.corrupt(
            f"expected the end of the stream header body, found {cur.remaining} more byte(s)"
        )
    return StreamHeader(fields["frame width"], fields["frame height"],
                        fields["frame rate numerator"], fields["frame rate denominator"], level,
                        num_frames, tuple(models), settings, defaults, version)  # fmt: skip


def _parse_header_body(body: bytes, base: int) -> StreamHeader:
    cur = _Cursor(body, base, None, "stream header body")
    fixed_offset = cur.offset
    width, height, fps_num, fps_den, level, num_frames = _HEADER_FIXED.unpack(
        cur.take(_HEADER_FIXED.size, "fixed header fields")
    )
    for name, value in (("width", width), ("height", height)):
        if value == 0:
            raise cur.corrupt(f"frame {name}: expected >= 1, found 0", offset=fixed_offset)
    for name, value in (("frame rate numerator", fps_num), ("frame rate denominator", fps_den)):
        if value == 0:
            raise cur.corrupt(f"{name}: expected >= 1, found 0", offset=fixed_offset)
    models: list[ModelEntry] = []
    seen: set[str] = set()
    count = cur.uvarint("model count")
    for i in range(count):
        entry_offset = cur.offset
        name = cur.text(f"model #{i} name")
        if not name:
            raise cur.corrupt(f"model #{i}: expected a non-empty name", offset=entry_offset)
        if name in seen:
            raise cur.corrupt(f"model {name!r} is listed twice", offset=entry_offset)
        seen.add(name)
        digest_offset = cur.offset
        digest_len = cur.u8(f"model {name!r} digest length")
        if digest_len not in (0, _SHA256_BYTES):
            raise cur.corrupt(
                f"model {name!r} digest length: expected 0 or {_SHA256_BYTES}, found {digest_len}",
                offset=digest_offset,
            )
        digest = cur.take(digest_len, f"model {name!r} sha256")
        models.append(ModelEntry(name, digest.hex() if digest else None))
    settings: dict[str, str] = {}
    previous: str | None = None
    count = cur.uvarint("settings count")
    for i in range(count):
        key_offset = cur.offset
        key = cur.text(f"settings key #{i}")
        if not key:
            raise cur.corrupt(f"settings key #{i}: expected a non-empty key", offset=key_offset)
        if previous is not None and key <= previous:
            raise cur.corrupt(
                f"settings key {key!r}: expected keys in strictly increasing order, "
                f"found it after {previous!r}",
                offset=key_offset,
            )
        settings[key] = cur.text(f"settings[{key!r}]")
        previous = key
    if cur.remaining:
        raise cur.corrupt(
            f"expected the end of the stream header body, found {cur.remaining} more byte(s)"
        )
    return StreamHeader(width, height, fps_num, fps_den, level, num_frames, tuple(models),
                        settings, version=2)


def header_bytes(header: StreamHeader) -> int:
    """Size of the encoded stream header in bytes (all of it is framing, not payload)."""
    return len(header.to_bytes())
