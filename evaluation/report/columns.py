"""What each column of the benchmark's results means: one definition per column, used by
``report.md`` (the columns a report shows) and quoted by the README's metrics table."""

from __future__ import annotations

#: Column name -> definition (Markdown, one paragraph).
COLUMN_DEFINITIONS: dict[str, str] = {
    "bpp": "payload bits actually written by the encoder / (width x height x frames) of the "
    "input size; for x264/x265 the Annex-B stream (parameter sets + packets), for jpeg/webp "
    "the image files; container overhead is in `container_bytes` of results.csv",
    "psnr": "mean over frames of per-frame PSNR on RGB (dB, peak 255, capped at 100; higher "
    "is better)",
    "psnr_y": "as `psnr`, on BT.601 luma",
    "ms_ssim": "mean over frames of MS-SSIM on RGB (`pytorch-msssim`, data range 255; higher "
    "is better)",
    "st_lpips": "shift-tolerant LPIPS (AlexNet; Ghildyal & Liu, ECCV 2022) of the whole frame, "
    "mean over the evaluated frames (`--lpips-every K`: every K-th; lower is better)",
    "person_st_lpips": "ST-LPIPS on crops around the ground-truth people (each box enlarged "
    "1.2x about its centre, resized to 64x128) in the reference and the decoded frame; mean "
    "over all crops, on the frames ST-LPIPS uses (lower is better)",
    "seam": "per ground-truth person, the decoded frame's Sobel edge energy of luma on the band "
    "between the box scaled 0.8x and 1.4x, in excess of the original's, relative to it; mean "
    "over people (0: no seam; a pasted box of other background shows its edges)",
    "frozen_blocks": "10x10-pixel blocks inside a moving ground-truth person's box whose "
    "decoded pixels stay equal to the previous frame's for more than 2 s in a row (0: no "
    "frozen person)",
    "person_recall": "scaffold codec: the share of ground-truth people that the decoded "
    "scaffolds carry (boxes matched at IoU >= 0.5)",
    "twe": "temporal warping error in excess of the original's (8-bit luma levels at half "
    "size): decoded frame t-1 warped to t with the original's optical flow, mean absolute "
    "error against decoded frame t where the warp predicts the original, minus the "
    "original's error there (0: as steady as the original; lower is better)",
    "moda": "CLEAR MOD accuracy of the person detector on the decoded frames: 1 - (misses + "
    "false positives) / people, detections matched to ground truth at IoU >= 0.5 (higher is "
    "better; the `raw` row is the detector on the uncompressed frames)",
    "modp": "CLEAR MOD precision: mean IoU of the matched detections (higher is better)",
    "enc_fps": "frames encoded per wall-clock second on the machine of the report",
    "dec_fps": "frames decoded per wall-clock second on the machine of the report",
}


def definitions_for(columns: list[str]) -> list[str]:
    """Markdown bullets defining those of ``columns`` that have a definition, in order."""
    return [f"- `{c}`: {COLUMN_DEFINITIONS[c]}." for c in columns if c in COLUMN_DEFINITIONS]
