"""Provides the Textual user interface of the cockpit (imported only by `cockpit connect` / `demo`)."""
