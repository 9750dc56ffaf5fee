"""Provides the old home of the submit helpers, for the launcher screen only, until it moves to
`launch.plan` / `launch.submit`; delete this module then. Everything else imports `cockpit.core.launch`."""

from __future__ import annotations

from cockpit.core.launch import submit_request, upload_working_dir, zip_directory

__all__ = ["submit_request", "upload_working_dir", "zip_directory"]
