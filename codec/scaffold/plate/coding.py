"""How a plate is coded, on both sides: the intra coders of its sizes and the grid of tiles
it is refined by."""

from __future__ import annotations

#: Tiles per side of the grid a plate is refined by (``LevelConfig.plate_refine``).
PLATE_TILE_GRID = 4


def plate_tiles(size: tuple[int, int],
                grid: int = PLATE_TILE_GRID) -> list[tuple[int, int, int, int]]:  # fmt: skip
    """The ``grid`` x ``grid`` tiles of a plate of ``size = (width, height)``, row by row:
    ``(x0, y0, x1, y1)`` pixel bounds (end exclusive), covering the plate exactly."""
    width, height = size
    xs = [width * k // grid for k in range(grid + 1)]
    ys = [height * k // grid for k in range(grid + 1)]
    return [(xs[c], ys[r], xs[c + 1], ys[r + 1]) for r in range(grid) for c in range(grid)]


def plate_coders(config) -> list:
    """An intra coder per :attr:`LevelConfig.keyframe_scales`, smallest first."""
    from semcodec.codec.keyframes import create_intra_coder

    return [create_intra_coder(config.keyframe_coder, downscale=scale)
            for scale in config.keyframe_scales]  # fmt: skip


def tile_coder(config):
    """The intra coder of plate tiles: the keyframe coder at full size."""
    from semcodec.codec.keyframes import create_intra_coder

    return create_intra_coder(config.keyframe_coder)
