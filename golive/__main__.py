"""`python -m golive …` is `golive …` (where the console script is not on PATH)."""

import sys

from golive.cli import main

sys.exit(main())
