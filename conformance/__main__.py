"""`python -m conformance` is the same as the `qmd-conformance` console script."""

import sys

from conformance.cli import main

sys.exit(main())
