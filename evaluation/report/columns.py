"""What each column of the benchmark's results means: one definition per group of columns,
used by ``report.md`` (the columns a report shows) and by the README's metrics table
(``semcodec-bench figures --readme`` writes it to ``docs/results/columns.md``). The numbers
in the definitions are the metrics' own constants."""

from __future__ import annotations

from dataclasses import dataclass

from semcodec.evaluation.metrics.image import MAX_PSNR_DB, MS_SSIM_THREADS
from semcodec.evaluation.metrics.moda import GROUND_MATCH_M, IGNORE_COVERAGE, MATCH_IOU
from semcodec.evaluation.metrics.person_region import (
    BOX_MARGIN,
    CROP_SIZE,
    FROZEN_BLOCK,
    FROZEN_LIMIT_S,
    MOVING_PX,
    SEAM_BAND,
)
from semcodec.evaluation.metrics.pose_agreement import (
    MIN_PRESENCE,
    MIN_VISIBILITY,
    PCK_FRACTION,
    POSE_MODEL,
)
from semcodec.evaluation.metrics.temporal import CONSISTENT_LEVELS


@dataclass(frozen=True)
class ColumnDefinition:
    """The definition (Markdown, one paragraph, no final full stop) of ``columns``; ``label``
    names the entry where it is not a results column (the saving factor)."""

    columns: tuple[str, ...]
    text: str
    label: str = ""

    @property
    def name(self) -> str:
        """How the entry is written: its label, or its columns as code spans."""
        return self.label or ", ".join(f"`{c}`" for c in self.columns)


def _g(value: float) -> str:
    """``value`` as the README writes it: ``1.2``, ``100``, ``0.5``."""
    return f"{value:g}"


DEFINITIONS: tuple[ColumnDefinition, ...] = (
    ColumnDefinition(("bytes", "bpp"), "payload bytes actually written by the encoder, and "
                     "bits / (width x height x frames) of the input size; for x264/x265 the "
                     "Annex-B stream (parameter sets + packets), for jpeg/webp the image files"),
    ColumnDefinition(("container_bytes",), "what an MP4 file adds around the payload (not in "
                     "`bpp`)"),
    ColumnDefinition(("psnr", "psnr_y"), "mean over frames of per-frame PSNR (dB, peak 255, "
                     f"capped at {_g(MAX_PSNR_DB)}) on RGB and on BT.601 luma (higher is better)"),
    ColumnDefinition(("ms_ssim",), "mean over frames of MS-SSIM on RGB (`pytorch-msssim`, data "
                     f"range 255; {MS_SSIM_THREADS} torch thread, which is faster here than two; "
                     "higher is better)"),
    ColumnDefinition(("st_lpips", "st_lpips_frames"), "shift-tolerant LPIPS (AlexNet; Ghildyal "
                     "& Liu, ECCV 2022) of the whole frame, our own network loading "
                     "`perceptual/stlpips_alex_shift_tolerant.pth`, identical to the reference "
                     "package; `--lpips-every K` evaluates every K-th frame (`st_lpips_frames` "
                     "says how many; lower is better)"),
    ColumnDefinition(("person_psnr", "person_st_lpips", "person_crops"), "PSNR and ST-LPIPS on "
                     "crops around the ground-truth people: each counted box of an evaluated "
                     f"frame enlarged {_g(BOX_MARGIN)}x about its centre, clipped to the frame "
                     f"and resized to {CROP_SIZE[0]}x{CROP_SIZE[1]}, in the reference and the "
                     "decoded frame; means over all crops (`person_crops` says how many), on the "
                     "frames ST-LPIPS uses; metric `person` (needs ground truth)"),
    ColumnDefinition(("seam",), "with metric `person`, on the same frames: per counted "
                     "ground-truth person, the mean Sobel edge magnitude of the luma on the band "
                     f"between the box scaled {_g(SEAM_BAND[0])}x and {_g(SEAM_BAND[1])}x about "
                     "its centre, in the decoded frame and in the original; the person's seam is "
                     "the decoded excess relative to the original's, `max(0, decoded - "
                     "original) / original`; the mean over people (0: no seam; a blur scores 0, "
                     "a pasted box of other background its edges)"),
    ColumnDefinition(("frozen_blocks", "frozen_max_s"), "the frozen-person check (with metric "
                     f"`person`): the frame is cut into a fixed grid of {FROZEN_BLOCK}x"
                     f"{FROZEN_BLOCK}-pixel blocks; a block is frozen in a frame when its "
                     "decoded pixels equal the previous frame's while it lies inside the box of "
                     f"a ground-truth person who moved (box centre ≥ {_g(MOVING_PX)} px) between "
                     f"the two frames; `frozen_blocks` counts blocks frozen for more than "
                     f"{_g(FROZEN_LIMIT_S)} s in a row (0: no frozen person), `frozen_max_s` is "
                     "the longest run"),
    ColumnDefinition(("person_recall", "scaffold_people"), "for the scaffold codec (with metric "
                     "`person`): the share of counted ground-truth people that the decoded "
                     f"scaffolds carry (their boxes matched at IoU ≥ {_g(MATCH_IOU)}, as CLEAR "
                     "MOD matches), and the mean number of people per frame the scaffolds "
                     "carry"),
    ColumnDefinition(("ref_share", "ref_bytes_per_person_s"), "for the scaffold codec: the "
                     "appearance references' share of the stream's unit bytes, and their bytes "
                     "per second of a person the decoded scaffolds carry (frames measured "
                     "only)"),
    ColumnDefinition(("flicker", "twe"), "temporal consistency (metric `temporal`), in 8-bit "
                     "luma levels at half resolution, 0 for a copy of the original: `flicker` is "
                     "the mean over frame pairs of the difference between the decoded and the "
                     "original change of mean luma; `twe` is the temporal warping error in excess "
                     "of the original's: decoded frame t-1 warped to t with the original's DIS "
                     "flow, mean absolute error against decoded frame t on the pixels where the "
                     f"same warp predicts the original within {_g(CONSISTENT_LEVELS)} levels, "
                     "minus the original's error there (lower is better; below 0: smoother than "
                     "the original, e.g. its noise removed)"),
    ColumnDefinition(("pose_pck", "pose_people", "pose_lost"), "pose agreement (metric "
                     f"`pose`, on the frames ST-LPIPS uses; needs ground truth): BlazePose "
                     f"(`{POSE_MODEL}`, the edge's level-3 model) run on each counted "
                     "ground-truth box in the original and in the decoded frame; of the 13 body "
                     "joints (nose, shoulders, elbows, wrists, hips, knees, ankles) those the "
                     f"original shows (visibility ≥ {_g(MIN_VISIBILITY)}, people found with "
                     f"presence ≥ {_g(MIN_PRESENCE)}), `pose_pck` is the share whose decoded "
                     f"position lies within {_g(PCK_FRACTION)} x the box height of the "
                     "original's (PCK; a person the model does not find in the decoded frame "
                     "disagrees on every joint; 1 for a copy, higher is better); `pose_people` "
                     "counts the people, `pose_lost` is the share of them not found in the "
                     "decoded frame"),
    ColumnDefinition(("saving",), "in `report.md` and `saving.csv`: for each row of a codec that "
                     "is not a baseline, the BPP the best x264/x265 curve of the same run needs "
                     "for the same full-frame ST-LPIPS, person-region ST-LPIPS and MODA "
                     "(interpolated in log-BPP), over the row's BPP; `<=`/`>=` where the quality "
                     "lies outside every baseline's measured range", label="saving factor"),
    ColumnDefinition(("fvd",), "Fréchet video distance with the TorchScript I3D (Kinetics-400) "
                     "from `--fvd-weights` or `fvd/i3d_torchscript.pt` in a models dir; left "
                     "empty, with one message saying what is missing, when the weights are "
                     "absent (they are not available here; lower is better)"),
    ColumnDefinition(("moda", "modp"), "CLEAR MOD (Kasturi et al., PAMI 2009) of the person "
                     "detector on the decoded frames: per frame, Hungarian matching of person "
                     f"detections to ground-truth boxes at IoU ≥ {_g(MATCH_IOU)}; MODA = 1 − "
                     "(misses + false positives) / objects; MODP = N-MODP (mean IoU of matches "
                     "per frame, averaged over frames with a match); a detection with at least "
                     f"{_g(IGNORE_COVERAGE)} of its area on an ignore region is not a false "
                     "positive (higher is better; the `raw` row is the detector on the "
                     "uncompressed frames)"),
    ColumnDefinition(("moda_ground",), "MODA matched on the ground plane (≤ "
                     f"{_g(GROUND_MATCH_M)} m), through a homography fitted from the ground "
                     "truth's world coordinates "
                     "(PETS09-S2L1 has them)"),
    ColumnDefinition(("enc_fps", "dec_fps"), "wall-clock frames per second of `encode` / "
                     "`decode` on the machine in `machine`; empty for `raw`"),
    ColumnDefinition(("dec_flops_per_frame",), "decoder FLOPs per frame of its networks: "
                     "restorer, redrawer, refiner (counted as `torch.utils.flop_counter` counts), "
                     "diffusion (`torch.utils.flop_counter`), "
                     "super-resolution and the cloud's person matte model (2 x the "
                     "multiply-adds of its layers, from the graph's shapes); empty where it "
                     "runs none"),
)  # fmt: skip


def definitions_for(columns: list[str]) -> list[str]:
    """Markdown bullets defining the entries that cover any of ``columns``, in their order."""
    shown = set(columns)
    return [f"- {d.name}: {d.text}." for d in DEFINITIONS if shown & set(d.columns)]


def columns_table() -> str:
    """The README's metrics table (Markdown): every entry of :data:`DEFINITIONS`."""
    lines = ["| column | definition |", "|---|---|"]
    lines += [f"| {d.name} | {d.text} |" for d in DEFINITIONS]
    return "\n".join(lines) + "\n"
