"""``python -m console`` runs the same entry point as ``seat-console``."""

import sys

from console.cli import main

sys.exit(main())
