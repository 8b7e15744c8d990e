"""semcodec: cloud."""
