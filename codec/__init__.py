"""semcodec: codec."""
