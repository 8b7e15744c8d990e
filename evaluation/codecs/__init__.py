"""The codecs the benchmark measures, behind one ``Codec`` interface and registry: the
H.264/HEVC/JPEG/WebP baselines and raw frames, and the scaffold codec."""
