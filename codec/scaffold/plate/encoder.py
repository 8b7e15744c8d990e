"""The edge's side of the plate: what it sends of the background, when, and at what cost.

A stream's keyframe picture is the frame itself (levels without a plate) or the background
plate (``plate="median"``: :class:`~codec.scaffold.plate.background.BackgroundModel`). With a
rate target, the plate the decoder holds is improved in frame units three ways:

* a **plate refresh**: the plate coded again when the account has saved up enough to buy a
  better one (:data:`PLATE_REFRESH_GAIN`);
* a **periodic plate** at each plate period (a keyframe interval of a stream that keeps its
  references), sent only when it is closer to the background model than the plate held;
* **refinement tiles** (``plate_refine`` of the target): one tile of a
  :data:`~codec.scaffold.plate.coding.PLATE_TILE_GRID`-square grid, where the model is
  furthest from what the decoder holds.

:class:`PlateEncoder` keeps the decoder's plate mirrored (the coded picture, decoded) so that
every choice is made against what the cloud will show.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

from semcodec.codec.bitstream import SubStream, SubStreamType
from semcodec.codec.scaffold.plate.coding import (
    PLATE_TILE_GRID,
    plate_coders,
    plate_tiles,
    tile_coder,
)
from semcodec.codec.scaffold.streams import EncoderStats, StageTimer

#: A plate refresh is tried when the rate has saved up this many times the bytes of the
#: plate the decoder holds (or of the last try that bought no better quality).
PLATE_REFRESH_GAIN = 1.5
#: Fewest bytes set aside before a plate tile is tried (a tile's coding has ~100 bytes of
#: parameter sets); usually more (``PlateEncoder._tile_bytes``).
MIN_TILE_BYTES = 300
#: Frames between recomputations of the background model's plate for tile refinement.
TILE_PLATE_EVERY = 8
#: A tile is sent only when it lowers the tile's mean squared error by this fraction.
TILE_MIN_GAIN = 0.1
#: Seconds of video the background plate's median covers (``plate="median"``).
PLATE_WINDOW_S = 10.0
#: Most pixels of the background model's frames (its memory: 64 of them; larger plates are
#: coded from it upscaled).
PLATE_MODEL_PIXELS = 768 * 576
#: Frames the background model keeps.
PLATE_MODEL_FRAMES = 64


def background_size(size: tuple[int, int]) -> tuple[int, int]:
    """``size`` shrunk (aspect kept) to at most :data:`PLATE_MODEL_PIXELS`."""
    width, height = size
    shrink = min(1.0, math.sqrt(PLATE_MODEL_PIXELS / (width * height)))
    return max(1, round(width * shrink)), max(1, round(height * shrink))


class PlateEncoder:
    """The keyframe pictures and plate updates of one stream.

    Args:
        config: the stream's :class:`~codec.scaffold.levels.LevelConfig`.
        frame_size: ``(width, height)`` of the frames in pixels.
        fps: their frame rate.
        stats: the encoder's accounting (plate refreshes, tiles, periods kept, seconds).
        expected_frames: the clip's length when known (0: a live stream).

    Attributes:
        rate: the stream's :class:`~codec.scaffold.rate.RateController` (None: no rate
            target), set by the encoder once made.
        background: the background model (None: the keyframe picture is the frame).
        refine: the share of the target refinement tiles take (``plate_refine``, resolved
            per camera by :meth:`resolve_refine`).
        person_area: fraction of the frame people cover, from the camera's profile (None:
            not measured).
    """

    def __init__(self, config, frame_size: tuple[int, int], fps: float, stats: EncoderStats,
                 expected_frames: int = 0) -> None:  # fmt: skip
        from semcodec.codec.keyframes import create_intra_coder

        self.config, self.frame_size, self.fps = config, frame_size, fps
        self.stats = stats
        self.expected_frames = int(expected_frames)
        self.rate = None
        self.refine = config.plate_refine
        self.person_area: float | None = None
        self._intra = create_intra_coder(config.keyframe_coder, downscale=config.keyframe_scale)
        self._tile_coder = tile_coder(config)
        # with a byte cap per plate, its size is chosen among the stream's scales
        self._coders = plate_coders(config) if config.target_bpp > 0 else [self._intra]
        self.background = None
        if config.plate == "median":
            from semcodec.codec.scaffold.plate.background import BackgroundModel

            stride = max(1, round(PLATE_WINDOW_S * fps / PLATE_MODEL_FRAMES))
            size = background_size(self._coders[-1].coded_size(frame_size))
            self.background = BackgroundModel(size, window=PLATE_MODEL_FRAMES, stride=stride)
        self._error, self._retry = math.inf, math.inf  # the decoder's plate
        self._held: np.ndarray | None = None  # (H, W, 3) float32: what the decoder holds
        self._held_uint8: np.ndarray | None = None  # the same as uint8, made when asked
        self._tile_credit = 0.0  # bytes set aside for plate tiles
        # tiles: (frame index, background plate, each tile's squared error against the plate
        # held) and the errors no tile coding beat
        self._tile_target: tuple[int, np.ndarray, np.ndarray] | None = None
        self._tile_floor = np.zeros(PLATE_TILE_GRID**2)

    # ------------------------------------------------------------------ start-up

    @property
    def lookahead_frames(self) -> int:
        """Frames the background model's window spans (0 without one)."""
        return 0 if self.background is None else self.background.window * self.background.stride

    def prime(self, frames: Sequence[np.ndarray], find_people=None) -> None:
        """Feeds look-ahead ``frames`` to the background model. With ``find_people``,
        ``(index, frame) -> (N, 4) boxes`` (frame pixels), the people of every frame the
        model keeps (:meth:`~codec.scaffold.plate.background.BackgroundModel.prime_indices`)
        are left out of its vote, so the first plate is built from person-free pixels."""
        if self.background is None:
            return
        people = {}
        if find_people is not None:
            people = {i: find_people(i, frames[i])
                      for i in self.background.prime_indices(len(frames))}  # fmt: skip
        self.background.prime(frames, people)

    def choose_split(self, frames: Sequence[np.ndarray], profile, priority: str,
                     references: bool):  # fmt: skip
        """Splits the first window's budget between the first plate and the people's
        references by the stream's ``priority``, from the camera's own start-up ``frames``
        and the people its ``profile`` saw (:func:`~codec.scaffold.plate.share.choose_split`:
        the plate coded within each share of the window, a reference coded at each quality
        on the sampled people, the pair of least weighted error that fits); sets the rate's
        first plate share and says the choice in ``stats.profile``.

        Returns:
            The :class:`~codec.scaffold.plate.share.Split` (its ``quality`` is the
            references'), or None: no rate-controlled median plate with ``references``;
            or ``priority`` ``balanced`` or nobody seen: then the first plate takes the
            pixels' share (:func:`~codec.scaffold.plate.share.cold_start_plate_share`) and
            the references keep the level's quality.
        """
        from semcodec.codec.scaffold.plate import share as split
        from semcodec.codec.scaffold.rate import WINDOW_S

        if self.rate is None or self.background is None or not references:
            return None
        rate = self.rate
        seconds = min(rate.window_frames / self.fps, WINDOW_S)  # the clip's when shorter
        people = profile.people / max(1, len(profile.frames))
        self.person_area = split.person_area_fraction(profile.person_height, people,
                                                      self.frame_size)  # fmt: skip
        if priority == "balanced" or not profile.samples:
            share, sends = self._share_over(seconds)
            rate.first_plate_share = share
            self.stats.profile += (f"; first plate {share:.2f} of the first {seconds:.3g} s "
                                   f"(people cover {self.person_area:.1%} of the frame, each "
                                   f"sent {sends:.2g} times)")  # fmt: skip
            return None
        picture = self._picture()
        window = rate.window_bytes
        plate_points = []
        for share in split.PLATE_SHARES:
            error, data, _ = self._fit(picture, max(200, int(share * window)))
            plate_points.append((share, len(data), error))
        reference_points = split.reference_points(frames, profile.samples)
        sends = 1.0 + seconds / self.config.appearance_refresh_s
        reserve = rate.window_frames * (split.UNIT_FRAMING_BYTES
                                        + people * split.BOX_BYTES_PER_PERSON)  # fmt: skip
        budget = window + min(0.0, rate.balance) - reserve  # the header is paid already
        attention = split.people_attention(priority, self.person_area)
        chosen = split.choose_split(plate_points, reference_points, attention, people * sends,
                                    budget)  # fmt: skip
        rate.first_plate_share = chosen.plate_share
        self.stats.profile += (f"; {chosen.describe(priority, people * sends)}; people cover "
                               f"{self.person_area:.1%} of the frame")  # fmt: skip
        return chosen

    def _share_over(self, seconds: float) -> tuple[float, float]:
        """The plate's share of ``seconds`` of budget, sent once, against the people's
        (covering :attr:`person_area`), each sent once and again every
        ``appearance_refresh_s``: ``(share, times each person is sent)``."""
        from semcodec.codec.scaffold.plate.share import cold_start_plate_share

        sends = 1.0 + seconds / self.config.appearance_refresh_s
        return cold_start_plate_share(self.person_area, sends), sends

    def resolve_refine(self, tiles: int, profiled: bool) -> float:
        """Replaces a per-camera ``plate_refine`` by the share the camera calls for and
        returns it (the encoder records it in the header's config): with a tiled layout
        (``tiles > 1``: small people) the share the first plate's rule gives over a plate
        period (:func:`~codec.scaffold.plate.share.cold_start_plate_share` of the people's
        area, each sent once per ``appearance_refresh_s`` of the period; 0.5 on
        PETS09-S2L1-full, where 0.25, 0.4 and 0.5 gave whole-frame ST-LPIPS 0.152 / 0.133 /
        0.120 and MODA 0.417 / 0.386 / 0.389 in steady state) or, without a profile,
        :data:`~codec.scaffold.levels.SMALL_PEOPLE_PLATE_REFINE`; else 0 -- and 0 for a clip
        of known length that ends before a plate period has passed after its first rate
        window (tiles start after that window and pay back over the period they are shown
        in; on 42-second clips refinement cost MODA: "What a viewer sees in steady state"
        in the journal). The share stays after a scene cut (the header is sent);
        ``profiled`` says the stream's profile line gets it."""
        from semcodec.codec.scaffold.levels import (
            PLATE_REFINE_PER_CAMERA,
            SMALL_PEOPLE_PLATE_REFINE,
        )
        from semcodec.codec.scaffold.rate import window_frames

        if self.refine != PLATE_REFINE_PER_CAMERA:  # the level's, or resolved already
            return self.refine
        window = window_frames(self.fps)
        period = self.config.keyframe_interval or window  # no plate period: one more window
        short = 0 < self.expected_frames < window + period
        share = SMALL_PEOPLE_PLATE_REFINE if tiles > 1 and not short else 0.0
        if share and self.person_area is not None and self.config.keyframe_interval:
            # the plate's share of a period by the first plate's rule: pixels sent once
            # against the people's, sent at every refresh of the period
            share, _ = self._share_over(self.config.keyframe_interval / self.fps)
        self.refine = share
        if profiled:
            self.stats.profile += f"; plate refinement {share:g} of the target"
        return share

    # ------------------------------------------------------------------ per frame

    def feed(self, frame: np.ndarray, boxes: np.ndarray | None = None) -> None:
        """A frame that is not a keyframe: the background model sees it, with the
        ``(N, 4)`` boxes (frame pixels) of its people."""
        if self.background is not None:
            self.background.update(frame, boxes)

    def keyframe(self, frame: np.ndarray, cut: bool) -> bytes:
        """The intra-coded keyframe picture of a keyframe unit: the frame, or the background
        plate (``cut``: a scene cut, the old background is gone). Any tile credit is
        dropped."""
        self._tile_credit = 0.0
        picture = frame
        if self.background is not None:
            if cut:
                self.background.reset()
            if not len(self.background):
                self.background.update(frame)
            picture = self._picture()
        return self._code(picture)

    def update(self, index: int, scheduled: bool, pending: int) -> SubStream | None:
        """What frame unit ``index`` (0-based) sends of the plate, after ``pending`` bytes
        of its other streams: the periodic plate when ``scheduled``, else a refresh when the
        savings buy a better plate, else a refinement tile; None: nothing."""
        stats = self.stats
        with StageTimer(stats, "plate_refresh"):
            data = self._periodic() if scheduled else self._refresh(pending)
        if data:
            stats.plate_refreshes += 1
            return SubStream(SubStreamType.KEYFRAME_IMAGE, data)
        if self.refine <= 0:
            return None
        with StageTimer(stats, "plate_tile"):
            data = self._tile(index)
        if not data:
            return None
        stats.plate_tiles += 1
        return SubStream(SubStreamType.PLATE_TILE, data)

    def spread_frames(self, index: int) -> int:
        """Frames a later keyframe or periodic plate sent at frame ``index`` is repaid over
        (after this one): the plate period (else a window), no more than a clip of known
        length has left."""
        rate = self.rate
        frames = self.config.keyframe_interval or rate.window_frames
        if rate.expected_frames:
            frames = min(frames, rate.expected_frames - index)
        return max(0, frames)

    # ------------------------------------------------------------------ coding

    def _code(self, picture: np.ndarray) -> bytes:
        """A keyframe picture or a periodic plate: at the level's quality without a rate
        target, else within the keyframe's byte cap at the size and quality that leave the
        least error (then held as the decoder's plate).

        A periodic keyframe of a stream that keeps its references across it sends the
        background model's plate this way in a frame unit (a plate refresh), so that people
        keep their references and box state -- which renew themselves within
        ``appearance_refresh_s`` anyway, the gradual refresh a decoder that joins late
        needs -- and no burst of new references follows. A scene cut still starts a
        keyframe that resets everything."""
        if self.rate is None:
            return self._intra.encode(picture, self.config.keyframe_quality)
        return self._hold(*self._fit(picture, self.rate.keyframe_cap()))

    def _periodic(self) -> bytes:
        """The plate of a plate period: the background model's plate within the keyframe's
        cap, unless the plate the decoder holds (refined by tiles, or refreshed from
        savings) is already as close to the model: then ``b""``, and what was saved up for
        it goes to references. A periodic plate in a frame unit is no random-access point
        (a decoder needs the references and box state before it), so renewing the
        background is its only job."""
        picture = self._picture()
        if self.rate is None or self._held is None:
            return self._code(picture)
        error, data, decoded = self._fit(picture, self.rate.keyframe_cap())
        if error >= float(np.mean((self._held - picture) ** 2)):
            self.stats.plate_periods_kept += 1
            return b""
        return self._hold(error, data, decoded)

    def _picture(self) -> np.ndarray:
        """The background model's plate at the frame size, ``(H, W, 3)`` uint8 RGB."""
        return cv2.resize(self.background.plate(), self.frame_size,
                          interpolation=cv2.INTER_LINEAR)  # fmt: skip

    def _fit(self, picture: np.ndarray, cap: int) -> tuple[float, bytes, np.ndarray]:
        """``picture`` coded within ``cap`` bytes at the size (one of the stream's
        :attr:`LevelConfig.keyframe_scales`) and quality that leave the least mean squared
        error against it: ``(error, bytes, decoded float32)``. When no size fits, the
        smallest coding."""
        from semcodec.codec.scaffold.rate import choose_coding, fit_quality

        options = []
        for coder in self._coders:
            _, data = fit_quality(lambda q, c=coder: c.encode(picture, q), cap)
            decoded = coder.decode(data, self.frame_size).astype(np.float32)
            options.append((float(np.mean((decoded - picture) ** 2)), data, decoded))
        best = choose_coding([len(o[1]) for o in options], [o[0] for o in options], cap)
        return options[best]

    def held_picture(self) -> np.ndarray | None:
        """The plate the decoder holds now, ``(H, W, 3)`` uint8 (None before the first
        keyframe): what a new person's reference may be predicted from."""
        if self._held_uint8 is None and self._held is not None:
            self._held_uint8 = np.clip(self._held + 0.5, 0, 255).astype(np.uint8)
        return self._held_uint8

    def _hold(self, error: float, data: bytes, decoded: np.ndarray) -> bytes:
        """Records ``data`` as the plate the decoder holds (a refresh must beat its mean
        squared ``error``; ``decoded``, float32, is the picture it decodes to) and returns
        it."""
        self._error, self._retry = error, PLATE_REFRESH_GAIN * len(data)
        self._held, self._held_uint8 = decoded, None
        self._tile_floor[:] = 0.0
        self._tile_target = None  # the errors are against another plate now
        return data

    def _refresh(self, pending: int) -> bytes:
        """The plate coded again at a better quality than the decoder holds, when the rate
        has saved up enough for it beyond this frame's ``pending`` bytes (else ``b""``).
        After a try that bought no better quality, the next waits for
        :data:`PLATE_REFRESH_GAIN` times the bytes of that try."""
        budget = self.rate.plate_budget(pending)
        if budget < self._retry or not len(self.background):
            return b""
        error, data, decoded = self._fit(self._picture(), budget)
        if error >= self._error or len(data) > budget:
            self._retry = PLATE_REFRESH_GAIN * budget
            return b""
        return self._hold(error, data, decoded)

    def _tile(self, index: int) -> bytes:
        """One tile of the plate coded again where the edge's background model is furthest
        from what the decoder holds, when the bytes set aside for refinement (a
        ``plate_refine`` share of every frame's budget, less what a periodic plate is being
        repaid from it) buy a better one: the payload is the tile's index (one byte) and its
        intra-coded picture; ``b""`` when none is sent."""
        from semcodec.codec.scaffold.rate import fit_quality

        rate, held = self.rate, self._held
        if index < rate.window_frames:  # the first plate and references come first
            return b""
        # the plate's share of every frame, less what a periodic plate repays of it now
        share = max(0.0, self.refine * rate.frame_bytes - rate.plate_repayment)
        cap = float(rate.keyframe_cap())
        self._tile_credit = min(self._tile_credit + share, cap)
        if held is None or self._tile_credit < min(self._tile_bytes(), cap) \
                or not len(self.background):  # fmt: skip
            return b""
        tiles = plate_tiles(self.frame_size)
        if self._tile_target is None or index - self._tile_target[0] >= TILE_PLATE_EVERY:
            target = self._picture().astype(np.float32)
            errors = np.array([np.mean((held[y0:y1, x0:x1] - target[y0:y1, x0:x1]) ** 2)
                               for x0, y0, x1, y1 in tiles])  # fmt: skip
            self._tile_target = (index, target, errors)
        _, target, errors = self._tile_target
        open_errors = np.where(errors > self._tile_floor, errors, 0.0)  # none beaten there yet
        best = int(np.argmax(open_errors))
        if open_errors[best] <= 0:
            return b""
        x0, y0, x1, y1 = tiles[best]
        picture = np.clip(target[y0:y1, x0:x1] + 0.5, 0, 255).astype(np.uint8)
        cap = int(self._tile_credit) - 1
        _, data = fit_quality(lambda q: self._tile_coder.encode(picture, q), cap)
        decoded = self._tile_coder.decode(data, (x1 - x0, y1 - y0)).astype(np.float32)
        error = float(np.mean((decoded - target[y0:y1, x0:x1]) ** 2))
        if len(data) > cap or error > (1 - TILE_MIN_GAIN) * errors[best]:
            self._tile_floor[best] = errors[best]  # try elsewhere until the model moves
            return b""
        held[y0:y1, x0:x1] = decoded
        self._held_uint8 = None
        errors[best] = error
        self._tile_credit -= len(data) + 1
        return bytes([best]) + data

    def _tile_bytes(self) -> float:
        """Bytes a refinement tile waits for: the refinement's share of a plate period (of
        a window, without periodic plates) over the grid's tiles, so that each tile is coded
        about once a period at the quality that share buys (tiles coded as soon as
        :data:`MIN_TILE_BYTES` were saved up never got better than those few bytes: on
        PETS09-S2L1-full in steady state, 16 KB of such tiles left the plate's part of the
        whole-frame ST-LPIPS at 0.16, where one 34-KB plate gives 0.03)."""
        rate = self.rate
        period = self.config.keyframe_interval or rate.window_frames
        share = self.refine * rate.frame_bytes * period / PLATE_TILE_GRID**2
        return max(float(MIN_TILE_BYTES), share)
