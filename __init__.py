"""semcodec: edge-cloud semantic video coding.

The repository root is the ``semcodec`` package (see ``pyproject.toml``): ``semcodec.codec``
(the codec library), ``semcodec.edge`` (edge-agent), ``semcodec.cloud`` (cloud-decoder),
``semcodec.evaluation`` (semcodec-bench) and ``semcodec.protos`` (the wire protocol).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("semcodec")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"
