"""``python -m seat_console`` runs the same entry point as ``seat-console``."""

import sys

from seat_console.cli import main

sys.exit(main())
