"""semcodec: evaluation."""
