"""Provides `python -m cockpit`, the same as the `cockpit` console script."""

from __future__ import annotations

import sys

from cockpit.cli import main

sys.exit(main())
