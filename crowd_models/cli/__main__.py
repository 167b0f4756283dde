"""``python -m crowd_models.cli``: the same as ``crowd-models``."""

import sys

from crowd_models.cli import main

sys.exit(main())
