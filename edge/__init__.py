"""semcodec: edge."""
