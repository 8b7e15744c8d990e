"""Entropy coding of scaffolds with compressai's rANS coder and integer CDF tables."""
