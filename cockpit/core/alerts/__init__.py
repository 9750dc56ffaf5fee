"""Alerts: what the cockpit sees that a user away from the screen must hear of.

`rules` turns one look at a target into findings under named rules (one set, for the TUI and
`cockpit alerts` alike); `book` turns the findings of each look into alerts (each event once, each lasting
condition told, reminded and resolved); `send` is where they go besides the screen (JSON lines, a
desktop notification through the terminal, the user's command); `watch` is one target watched headless.
"""
