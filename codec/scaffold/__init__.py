"""Scaffold extraction: detection and tracking, segmentation, pose, flow, keyframes."""
