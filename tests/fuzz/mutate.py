"""Mutators for ``.semc`` streams: blind byte-level damage, and structure-aware changes with
every CRC recomputed (so the damage reaches the decoder behind the bitstream's checks).

Every function takes a :class:`random.Random` and returns new bytes; nothing here decodes.
"""

from __future__ import annotations

import dataclasses
import random

from semcodec.codec.bitstream import (
    ModelEntry,
    StreamHeader,
    SubStream,
    SubStreamType,
    Unit,
    UnitKind,
    read_stream,
)

#: Values a hostile header puts in a level-config setting.
HOSTILE_SETTINGS = ("0", "0.0", "-1", "1", "1.0", "2", "1e9", "1e-9", "1e-300", "nan", "inf",
                    "-inf", "", "abc", "True", "False", "9" * 400, "0.5", "0.25", "0.015625",
                    "65536", "hevc", "webp", "av1", "nope", "pose_landmark_lite")  # fmt: skip
HOSTILE_SIDES = (1, 2, 15, 16, 17, 31, 33, 385, 289, 1023, 4096, 8192, 8193, 65535)
HOSTILE_COUNTS = (0, 1, 2, 3, 7, 1 << 31, (1 << 32) - 1)


def parse(data: bytes) -> tuple[StreamHeader, list[Unit]]:
    """Header and units of a well-formed stream (raises on anything else)."""
    header, units = read_stream(data)
    return header, list(units)


def encode(header: StreamHeader, units: list[Unit]) -> bytes:
    """The stream's bytes, CRCs computed (units larger than the format allows are dropped)."""
    parts = [header.to_bytes()]
    for unit in units:
        try:
            parts.append(unit.to_bytes(version=header.version))
        except ValueError:
            continue
    return b"".join(parts)


# ----------------------------------------------------------------------------- bytes


def mutate_bytes(rng: random.Random, data: bytes, donors: list[bytes]) -> bytes:
    """1-8 blind edits: bit flips, byte sets, inserts, deletes, splices, truncation."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not out:
            out += rng.randbytes(rng.randint(1, 16))
        op = rng.randrange(7)
        pos = rng.randrange(len(out))
        if op == 0:
            out[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[pos] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op == 2:
            out[pos:pos] = rng.randbytes(rng.randint(1, 32))
        elif op == 3:
            del out[pos : pos + rng.randint(1, 64)]
        elif op == 4:
            donor = rng.choice(donors)
            start = rng.randrange(len(donor))
            out[pos:] = donor[start : start + rng.randint(1, 256)] + out[pos:]
        elif op == 5:
            del out[pos:]
        else:
            out[pos : pos + 8] = rng.randbytes(8)
    return bytes(out)


# ----------------------------------------------------------------------------- header


def mutate_header(rng: random.Random, header: StreamHeader) -> StreamHeader:
    """One hostile change of a header field (size, rate, level, count, setting, model)."""
    op = rng.randrange(7)
    if op == 0:
        width = rng.choice((*HOSTILE_SIDES, header.width * rng.randint(2, 10)))
        height = rng.choice((*HOSTILE_SIDES, header.height * rng.randint(2, 10), header.height))
        return dataclasses.replace(header, width=min(width, 65535), height=min(height, 65535))
    if op == 1:
        return dataclasses.replace(header, num_frames=rng.choice(HOSTILE_COUNTS))
    if op == 2:
        return dataclasses.replace(header, level=rng.randrange(256),
                                   fps_num=rng.choice((1, 7, (1 << 32) - 1)))  # fmt: skip
    if op == 3:
        return dataclasses.replace(header, models=_mutate_models(rng, header.models))
    settings = dict(header.settings)
    keys = sorted(settings) or ["level"]
    defaults = header.defaults
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(keys)
        choice = rng.randrange(5)
        if choice == 0:
            settings.pop(key, None)
            defaults = 0  # a header naming defaults holds all of their keys: write them all
        elif choice == 1:
            settings["unknown_" + key] = rng.choice(HOSTILE_SETTINGS)
        else:
            settings[key] = rng.choice(HOSTILE_SETTINGS)
    return dataclasses.replace(header, settings=settings, defaults=defaults)


def _mutate_models(rng: random.Random, models: tuple[ModelEntry, ...]) -> tuple[ModelEntry, ...]:
    models = list(models)
    if models and rng.random() < 0.5:
        models.pop(rng.randrange(len(models)))
    else:
        models.append(ModelEntry("flow_prior" if not models else f"m{rng.randrange(99)}",
                                 rng.randbytes(32).hex()))  # fmt: skip
    names = set()
    return tuple(m for m in models if not (m.name in names or names.add(m.name)))


# ----------------------------------------------------------------------------- units


def _mutate_payload(rng: random.Random, payload: bytes, donors: list[bytes]) -> bytes:
    op = rng.randrange(6)
    if op == 0:
        return b""
    if op == 1:
        return rng.randbytes(rng.choice((1, 4, 16, 64, 1024)))
    if op == 2:
        return payload[: rng.randrange(len(payload) + 1)]
    if op == 3:
        return payload + rng.randbytes(rng.randint(1, 32))
    if op == 4:
        return rng.choice(donors)
    return mutate_bytes(rng, payload, donors) if payload else rng.randbytes(8)


def mutate_unit(rng: random.Random, unit: Unit, donors: list[bytes]) -> Unit:
    """One change inside a unit: kind, seq, a sub-stream's type or payload, or their list."""
    subs = list(unit.substreams)
    op = rng.randrange(8)
    if op == 0:
        return Unit(rng.choice(list(UnitKind)), unit.seq, tuple(subs))
    if op == 1:
        seq = rng.choice((0, unit.seq + 1, max(unit.seq - 1, 0), (1 << 64) - 1, 1 << 32))
        return Unit(unit.kind, seq, tuple(subs))
    if op == 2 and subs:
        subs.append(rng.choice(subs))  # a repeated type
    elif op == 3 and subs:
        subs.pop(rng.randrange(len(subs)))
    elif op == 4:
        extra = SubStream(rng.choice(list(SubStreamType)), rng.randbytes(rng.randint(0, 32)))
        subs.insert(rng.randrange(len(subs) + 1), extra)
    elif op == 5 and subs:
        k = rng.randrange(len(subs))
        subs[k] = SubStream(rng.choice(list(SubStreamType)), subs[k].payload)
    elif op == 6:
        rng.shuffle(subs)
    elif subs:
        k = rng.randrange(len(subs))
        subs[k] = SubStream(subs[k].type, _mutate_payload(rng, subs[k].payload, donors))
    return Unit(unit.kind, unit.seq, tuple(subs))


def mutate_units(rng: random.Random, units: list[Unit], donors: list[bytes]) -> list[Unit]:
    """One change of the unit list: duplicate, drop, reorder, END games, or inside one unit."""
    units = list(units)
    op = rng.randrange(8)
    if not units:
        return [Unit(UnitKind.END, 0)]
    k = rng.randrange(len(units))
    if op == 0:
        units.insert(k, units[k])
    elif op == 1:
        units.pop(k)
    elif op == 2 and len(units) > 1:
        j = rng.randrange(len(units))
        units[k], units[j] = units[j], units[k]
    elif op == 3:
        units = [u for u in units if u.kind != UnitKind.END]  # no END
    elif op == 4:
        units = units[: k + 1]  # cut at a unit boundary (maybe keeping END)
    elif op == 5:
        units.insert(k, Unit(UnitKind.END, rng.choice((0, k, len(units), 1 << 40))))
    elif op == 6:
        units = [units[0]] * rng.randint(2, 4) + units[-1:]  # repeated keyframes
    else:
        units[k] = mutate_unit(rng, units[k], donors)
    return units


def mutate_payload_only(rng: random.Random, units: list[Unit], donors: list[bytes]) -> list[Unit]:
    """One sub-stream payload of one unit changed; everything else as it was."""
    units = list(units)
    candidates = [k for k, u in enumerate(units) if u.substreams]
    if not candidates:
        return units
    k = rng.choice(candidates)
    subs = list(units[k].substreams)
    j = rng.randrange(len(subs))
    subs[j] = SubStream(subs[j].type, _mutate_payload(rng, subs[j].payload, donors))
    units[k] = Unit(units[k].kind, units[k].seq, tuple(subs))
    return units


def mutate_structure(rng: random.Random, data: bytes, donors: list[bytes]) -> bytes:
    """1-3 structure-aware changes of a well-formed stream, re-encoded with valid CRCs, then
    sometimes cut (at a unit boundary or inside a unit)."""
    header, units = parse(data)
    payloads = [s.payload for u in units for s in u.substreams if s.payload] or [b"\x00"]
    if rng.random() < 0.35:  # only a payload: the structure stays valid, the coders get it
        return encode(header, mutate_payload_only(rng, units, payloads))
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.35:
            header = mutate_header(rng, header)
        else:
            units = mutate_units(rng, units, payloads + donors[:1])
    out = encode(header, units)
    if rng.random() < 0.1:
        out = out[: rng.randrange(len(out) + 1)]
    return out


def mutate(rng: random.Random, seeds: list[bytes], structure_share: float = 0.7) -> bytes:
    """A mutated seed: structure-aware with probability ``structure_share``, else blind."""
    data = rng.choice(seeds)
    if rng.random() < structure_share:
        return mutate_structure(rng, data, seeds)
    return mutate_bytes(rng, data, seeds)
