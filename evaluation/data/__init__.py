"""Where frames and ground truth come from: dataset recipes with checksums, MOT ground truth,
and new cameras made by zooming or scaling (``--camera-transform``)."""
