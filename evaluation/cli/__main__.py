"""``python -m semcodec.evaluation.cli``: the same as ``semcodec-bench``."""

import sys

from semcodec.evaluation.cli import main

sys.exit(main())
