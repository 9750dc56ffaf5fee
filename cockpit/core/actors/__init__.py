"""Provides actors: the listing with its filters and counts, roles from class names, the table's
rows, one actor's details and why placement is stuck."""
