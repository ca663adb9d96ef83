"""`python -m r2med_plugin.cli`: the `r2med` command."""

import sys

from r2med_plugin.cli import main

sys.exit(main())
