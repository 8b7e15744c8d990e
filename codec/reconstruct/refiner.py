"""The learned refiner of ``animate`` (issue 39 item 4): a small network that redraws each
animated person, conditioned on the animation, the pose now and the reference it came from.

``decoder=animate`` turns a person's remembered reference limb by limb to the pose the
stream sends (:func:`~codec.reconstruct.animate.animate_ref`): rigid bones, uncovered pixels
left to the plate. With ``refiner=NAME`` every person drawn with a pose is then refined
before it is composited over the plate:

* the animated picture and its alpha (the cloud's matte moved with it), enlarged to the
  person's size in the frame (at most :data:`REFINED_MAX_HEIGHT` high; a thumbnail is
  enlarged here, not by the compositing's resize);
* the reference it was animated from (not animated), resized to it;
* the pose now rendered as :data:`POSE_CHANNELS` limb maps (:func:`pose_maps`: torso, upper
  and lower arms, upper and lower legs, left and right in one channel each, Gaussian of the
  distance to the bone);

12 channels in -1..1 -> :class:`PersonRefiner` (the shape of the reference restorer,
:class:`~codec.reconstruct.restore.ReferenceRestorer`: a 3x3 convolution to ``width``
channels, a stride-2 stage of ``blocks`` residual blocks at twice the width, a transposed
convolution back, one more block) -> an RGB residual over the animated picture and an alpha
residual over its alpha. The **width is the compute knob** (FLOPs grow about as its square;
:func:`flops_per_pixel` counts them with
:func:`~codec.reconstruct.weights.conv_flops`). It runs once per person and
frame (the pose changes every frame), so its FLOPs per frame are people x output pixels x
FLOPs per pixel.

Trained by ``semcodec-bench train-refiner`` (:mod:`evaluation.training.refiner`) from the
shipped restorer of the same width (its two 3-channel inputs become the animated picture and
the reference; the new inputs and the alpha output start at zero), on the training ranges
only. The shipped weights (:data:`SHIPPED_REFINERS`) are registered with their sha256 in
:mod:`codec.core.models` and refused on a mismatch.

CPU float32 on one torch thread (:func:`~codec.reconstruct.weights.inference`): a fixed
function of the decoded scaffolds, so two runs (two processes, two machines) give the same
frames.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from semcodec.codec.reconstruct.restore import _Block
from semcodec.codec.reconstruct.weights import (
    conv_flops,
    inference,
    load_weights,
    save_weights,
    shipped_or_file,
)

#: Tallest refined person (pixels): the tallest reference level 1 sends.
REFINED_MAX_HEIGHT = 96
#: The limb maps, each a list of bones (pairs of :data:`~codec.core.types.BODY_JOINTS`
#: indexes; 0 nose, 1/2 shoulders, 3/4 elbows, 5/6 wrists, 7/8 hips, 9/10 knees, 11/12
#: ankles); the torso is the nose -> shoulders' middle -> hips' middle line (``None``).
POSE_CHANNELS = (None, ((1, 3), (2, 4)), ((3, 5), (4, 6)), ((7, 9), (8, 10)),
                 ((9, 11), (10, 12)))  # fmt: skip
#: Width of a limb map's Gaussian, box heights.
POSE_SIGMA = 0.04
#: Input channels: animated RGB, reference RGB, alpha, limb maps.
IN_CHANNELS = 3 + 3 + 1 + len(POSE_CHANNELS)


class PersonRefiner(nn.Module):
    """``(animated, reference, alpha, pose maps) -> (refined RGB, refined alpha)``.

    Inputs ``(N, 3, H, W)``, ``(N, 3, H, W)`` in -1..1, ``(N, 1, H, W)`` in 0..1 and
    ``(N, 5, H, W)`` in 0..1, ``H`` and ``W`` even; outputs ``(N, 3, H, W)`` (residual added
    to the animated picture, not clamped) and ``(N, 1, H, W)`` in 0..1.

    Args:
        width: channels at full resolution (twice that at half resolution): the compute knob.
        blocks: residual blocks at half resolution.
    """

    def __init__(self, width: int = 16, blocks: int = 4) -> None:
        super().__init__()
        if int(width) < 1 or int(blocks) < 0:
            raise ValueError(f"a refiner needs width >= 1 and blocks >= 0, got {width}, {blocks}")
        self.width, self.blocks = int(width), int(blocks)
        self.head = nn.Conv2d(IN_CHANNELS, width, 3, padding=1)
        self.down = nn.Conv2d(width, width * 2, 3, stride=2, padding=1)
        self.mid = nn.Sequential(*[_Block(width * 2) for _ in range(blocks)])
        self.up = nn.ConvTranspose2d(width * 2, width, 4, stride=2, padding=1)
        self.fuse = nn.Sequential(_Block(width), nn.Conv2d(width, 4, 3, padding=1))

    def forward(self, animated: torch.Tensor, reference: torch.Tensor, alpha: torch.Tensor,
                maps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        x = torch.cat([animated, reference, alpha * 2 - 1, maps * 2 - 1], 1)
        h = F.relu(self.head(x))
        m = self.mid(F.relu(self.down(h)))
        out = self.fuse(h + self.up(m))
        return animated + out[:, :3], (alpha + out[:, 3:4]).clamp(0.0, 1.0)


def from_restorer(restorer: nn.Module) -> PersonRefiner:
    """A refiner of ``restorer``'s width and blocks that starts as it: its enlarged-reference
    input reads the animated picture, its memory input the reference; the alpha and limb-map
    inputs and the alpha output start at zero (so it begins as the restorer applied to the
    animated picture, alpha unchanged)."""
    model = PersonRefiner(restorer.width, restorer.blocks)
    state = {k: v.clone() for k, v in restorer.state_dict().items()}
    head = torch.zeros_like(model.head.weight)
    head[:, :6] = state["head.weight"]
    state["head.weight"] = head
    last = f"fuse.{len(model.fuse) - 1}"
    weight, bias = torch.zeros_like(model.fuse[-1].weight), torch.zeros_like(model.fuse[-1].bias)
    weight[:3], bias[:3] = state[f"{last}.weight"], state[f"{last}.bias"]
    state[f"{last}.weight"], state[f"{last}.bias"] = weight, bias
    model.load_state_dict(state)
    return model


def _segment_distance(px: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ab = b - a
    t = np.clip(((px - a) @ ab) / max(float(ab @ ab), 1e-12), 0.0, 1.0)
    return np.hypot(*(px - (a + t[:, None] * ab)).T)


def pose_maps(uv: np.ndarray, visible: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``(5, height, width)`` float32 0..1 limb maps of a box-relative pose (``uv`` ``(13, 2)``
    box heights, ``visible`` ``(13,)``) on a picture of ``size = (width, height)`` covering
    the box: per channel of :data:`POSE_CHANNELS`, ``exp(-d^2 / 2 sigma^2)`` of the distance
    to its nearest bone whose two joints are visible (sigma :data:`POSE_SIGMA` box heights);
    0 where none is."""
    from semcodec.codec.core.types import ref_joints

    width, height = size
    joints = ref_joints(uv, (width, height))
    vis = np.asarray(visible, bool)
    ys, xs = np.mgrid[0:height, 0:width]
    px = np.stack([xs.ravel() + 0.5, ys.ravel() + 0.5], 1).astype(np.float64)
    sigma = POSE_SIGMA * height
    out = np.zeros((len(POSE_CHANNELS), height * width), np.float32)
    for c, bones in enumerate(POSE_CHANNELS):
        if bones is None:  # the torso's centre line
            segments = []
            if vis[1] and vis[2] and vis[7] and vis[8]:
                neck, pelvis = 0.5 * (joints[1] + joints[2]), 0.5 * (joints[7] + joints[8])
                segments.append((neck, pelvis))
                if vis[0]:
                    segments.append((joints[0], neck))
        else:
            segments = [(joints[i], joints[j]) for i, j in bones if vis[i] and vis[j]]
        if segments:
            d = np.min([_segment_distance(px, a, b) for a, b in segments], 0)
            out[c] = np.exp(-0.5 * (d / sigma) ** 2)
    return out.reshape(len(POSE_CHANNELS), height, width)


def refined_size(ref_shape: tuple[int, ...], box_height: float) -> tuple[int, int]:
    """``(width, height)``, both even, of a person refined from a reference of ``ref_shape``
    drawn ``box_height`` frame pixels high: the box's height (at most
    :data:`REFINED_MAX_HEIGHT`) at the reference's aspect."""
    h, w = ref_shape[:2]
    height = max(2, min(REFINED_MAX_HEIGHT, round(float(box_height))))
    height += height % 2
    width = max(2, round(w * height / max(h, 1)))
    return width + width % 2, height


def _resized(picture: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    if (picture.shape[1], picture.shape[0]) == size:
        return picture
    shrink = size[1] < picture.shape[0]
    return cv2.resize(picture, size, interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)


def _rgb(picture: np.ndarray) -> torch.Tensor:
    """``(H, W, 3+)`` uint8 -> ``(1, 3, H, W)`` float32 -1..1."""
    return torch.from_numpy(np.ascontiguousarray(picture[..., :3])).permute(2, 0, 1)[None]\
        .float().div(127.5).sub(1.0)  # fmt: skip


def refine_inputs(animated: np.ndarray, alpha: np.ndarray, reference: np.ndarray,
                  uv: np.ndarray, visible: np.ndarray, size: tuple[int, int]):  # fmt: skip
    """The four input tensors of :class:`PersonRefiner` (batch of 1) for a person animated to
    ``animated`` ``(h, w, 3+)`` uint8 with ``alpha`` ``(h, w)`` 0..1 from ``reference`` (any
    size), in the pose ``uv``/``visible``, at ``size`` ``(width, height)``."""
    a = np.clip(np.asarray(alpha, np.float32), 0.0, 1.0)
    a = cv2.resize(a, size, interpolation=cv2.INTER_LINEAR) if a.shape[::-1] != size else a
    return (_rgb(_resized(animated[..., :3], size)), _rgb(_resized(reference[..., :3], size)),
            torch.from_numpy(np.ascontiguousarray(a, np.float32))[None, None],
            torch.from_numpy(pose_maps(uv, visible, size))[None])  # fmt: skip


def refine_person(model: PersonRefiner, animated: np.ndarray, alpha: np.ndarray,
                  reference: np.ndarray, uv: np.ndarray, visible: np.ndarray,
                  size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The refined person: ``((height, width, 3) uint8, (height, width) float32 alpha 0..1)``
    at ``size`` (even sides; :func:`refined_size`), from :func:`refine_inputs`'s arguments."""
    inputs = refine_inputs(animated, alpha, reference, uv, visible, size)
    with inference():
        rgb, out_alpha = model(*inputs)
    rgb = rgb[0].clamp(-1, 1).add(1).mul(127.5).round().permute(1, 2, 0).to(torch.uint8)
    return rgb.numpy(), out_alpha[0, 0].numpy().astype(np.float32)


def flops_per_pixel(model: PersonRefiner) -> int:
    """FLOPs of ``model`` per output pixel, counted once on a 96x48 input
    (:func:`~codec.reconstruct.weights.conv_flops`; every layer is a convolution at a fixed
    ratio of the input's pixels, so one count gives every even size exactly)."""
    rgb, one = torch.zeros(1, 3, 96, 48), torch.zeros(1, 1, 96, 48)
    pose = torch.zeros(1, len(POSE_CHANNELS), 96, 48)
    return conv_flops(model, rgb, rgb, one, pose) // (96 * 48)


def save_refiner(model: PersonRefiner, path: Path, metadata: dict) -> Path:
    """Writes ``model``'s float32 weights, shape and ``metadata`` to ``path`` atomically."""
    return save_weights(model, {"kind": "refiner", "width": model.width,
                                "blocks": model.blocks}, path, metadata)  # fmt: skip


def _build(config: dict) -> PersonRefiner:
    if config.get("kind") != "refiner":
        raise ValueError("not a refiner's weights (config kind is not 'refiner')")
    return PersonRefiner(int(config["width"]), int(config["blocks"]))


def load_refiner(path: str | Path) -> PersonRefiner:
    """The refiner saved at ``path`` by :func:`save_refiner`, in eval mode.

    Raises:
        UnknownReconstructorError: a file that is not such a refiner.
    """
    return load_weights(path, _build, "refiner")


#: The shipped refiners by registry name, and the short names ``refiner=`` takes for them
#: (their width).
SHIPPED_REFINERS = {"w8": "person_refiner_w8", "w32": "person_refiner_w32"}


def refiner_weights(name: str) -> Path:
    """The file of refiner ``name``: a shipped refiner's short name (``w8``) or registry name
    (``person_refiner_w8``; resolved and its sha256 verified: a file whose sha256 differs is
    refused with :class:`~codec.core.models.ModelChecksumError`), or a refiner file.

    Raises:
        UnknownReconstructorError: neither.
    """
    return shipped_or_file(name, SHIPPED_REFINERS, "refiner")
