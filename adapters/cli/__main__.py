"""`python -m adapters.cli` runs the `qmd` command line."""

import sys

from adapters.cli.main import main

sys.exit(main())
