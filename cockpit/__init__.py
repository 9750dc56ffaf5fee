"""Provides ray-cockpit: a terminal cockpit for Ray clusters running multi-node RL training."""

from __future__ import annotations

__version__ = "0.1.0"
