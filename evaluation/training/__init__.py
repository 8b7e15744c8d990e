"""Training programs for the learned parts: the task bottleneck, the diffusion decoder and the
reference restorer (``semcodec-bench train-*``)."""
