"""Provides the errors of a launch: an override that is not KEY=VALUE, a working_dir that cannot be
packed, a pre-flight check that blocks the submit. All permanent: the profile or the command must
change first."""

from __future__ import annotations

from cockpit.core.errors import CockpitError


class OverrideError(CockpitError):
    """An item that is not KEY=VALUE; the message is one line naming the first bad item."""


class UploadError(CockpitError):
    """The working_dir cannot be packed (a bad pattern, an unreadable file, over the limit)."""


class LaunchBlocked(CockpitError):
    """A pre-flight check failed and the launch was not forced; the message names the first one."""
