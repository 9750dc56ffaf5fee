"""Provides logs: the bounded buffer of classified lines behind every log view, and where a job's,
an actor's or a node's log files are found and streamed from."""
