"""Track-id lists as small gaps: new ids are coded relative to the largest previous id."""

from __future__ import annotations

from collections.abc import Sequence

from semcodec.codec.entropy.rans import EntropyCodingError


def id_gaps(new_ids: Sequence[int], prev_ids: Sequence[int]) -> list[int]:
    """Gaps of ascending ``new_ids``: the first from ``max(prev_ids) + 1`` (or 1), then from
    the id before (so consecutive new ids cost zeros)."""
    base = (max(prev_ids) + 1) if prev_ids else 1
    out, last = [], None
    for i in new_ids:
        out.append(i - base if last is None else i - last - 1)
        last = i
    return out


def ids_from_gaps(gaps: Sequence[int], prev_ids: Sequence[int], max_id: int,
                  what: str) -> list[int]:  # fmt: skip
    """Inverse of :func:`id_gaps`; ids outside ``1..max_id - 1`` or negative inner gaps raise
    :class:`EntropyCodingError` naming ``what`` (the payload kind)."""
    base = (max(prev_ids) + 1) if prev_ids else 1
    out: list[int] = []
    for n, g in enumerate(int(v) for v in gaps):
        if n and g < 0:
            raise EntropyCodingError(f"corrupt {what} payload (id gaps)")
        out.append(base + g if n == 0 else out[-1] + 1 + g)
    if out and not (out[0] >= 1 and out[-1] < max_id):
        raise EntropyCodingError(f"corrupt {what} payload (id out of range)")
    return out
