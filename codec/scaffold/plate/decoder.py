"""The cloud's side of the plate: keyframe pictures and refinement tiles -> the plate held."""

from __future__ import annotations

import numpy as np

from semcodec.codec.scaffold.plate.coding import plate_coders, plate_tiles, tile_coder
from semcodec.codec.scaffold.streams import PayloadError


class PlateDecoder:
    """The plate a decoder holds, from the keyframe pictures and tiles of one stream.

    Args:
        config: the stream's :class:`~codec.scaffold.levels.LevelConfig`.
        frame_size: ``(width, height)`` of the frames in pixels.
        upscale: ``(picture, (width, height)) -> picture``, brings a plate coded smaller to
            the frame size (default: bicubic; the cloud's super-resolution passes its own).
    """

    def __init__(self, config, frame_size: tuple[int, int], upscale=None) -> None:
        self.frame_size = frame_size
        self.upscale = upscale
        self._coders = plate_coders(config)
        self._tile_coder = tile_coder(config)
        self._plate: np.ndarray | None = None  # the plate held, refined tile by tile
        #: the plate as the edge holds it (the default upscaling), refined alike: what a
        #: reference coded against the plate is predicted from (``_plate`` itself without
        #: an ``upscale``)
        self.exact: np.ndarray | None = None

    def keyframe(self, data: bytes) -> np.ndarray:
        """The keyframe picture (a plate, or the frame itself) at the frame size,
        ``(H, W, 3)`` uint8, from whichever of the stream's scales it was coded at (each size
        is checked before decoding); it becomes the plate held.

        Raises:
            KeyframeError: the picture is none of the stream's sizes or does not decode.
        """
        from semcodec.codec.core.frames import resize_to
        from semcodec.codec.keyframes import KeyframeError, KeyframeSizeError

        coded = []  # the picture as coded, when the cloud's own upscaler brings it to size

        def upscale(picture: np.ndarray, size: tuple[int, int]) -> np.ndarray:
            coded.append(picture)
            return self.upscale(picture, size)

        for coder in self._coders:
            try:
                self._plate = coder.decode(data, self.frame_size,
                                           None if self.upscale is None else upscale)  # fmt: skip
            except KeyframeSizeError:
                continue
            # the edge's copy: the same picture brought to size by the default resize
            self.exact = (resize_to(coded[-1][None], *self.frame_size)[0] if coded
                          else self._plate)  # fmt: skip
            return self._plate
        sizes = ", ".join("x".join(map(str, c.coded_size(self.frame_size)))
                          for c in self._coders)  # fmt: skip
        raise KeyframeError(f"the keyframe picture is none of the stream's sizes ({sizes})")

    def tile(self, payload: bytes, number: int) -> np.ndarray:
        """The plate held with one tile replaced (``payload``: the tile's index, one byte,
        then its intra-coded picture at the tile's size); a new array, the held one kept
        for the next tile.

        Raises:
            PayloadError: no plate held yet, an index outside the grid, or a picture that
                does not decode to the tile's size (``number``: the frame's, for the message).
        """
        from semcodec.codec.keyframes import KeyframeError

        tiles = plate_tiles(self.frame_size)
        if self._plate is None or len(payload) < 2 or payload[0] >= len(tiles):
            raise PayloadError(f"frame {number}: a plate tile needs a plate held and an index "
                               f"below {len(tiles)} followed by a picture")  # fmt: skip
        x0, y0, x1, y1 = tiles[payload[0]]
        try:
            picture = self._tile_coder.decode(payload[1:], (x1 - x0, y1 - y0))
        except KeyframeError as exc:
            raise PayloadError(f"frame {number}: plate tile {payload[0]}: {exc}") from exc
        plate = self._plate.copy()
        plate[y0:y1, x0:x1] = picture
        if self.exact is not self._plate:
            self.exact = self.exact.copy()
            self.exact[y0:y1, x0:x1] = picture
        else:
            self.exact = plate
        self._plate = plate
        return plate
