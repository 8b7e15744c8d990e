"""semcodec: protos."""
