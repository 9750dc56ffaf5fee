"""Provides the run doctor: stacks gathered from every node and grouped, and the hang watch that
decides when a job has stopped making progress."""
