"""Provides the demo RL-style workload that `cockpit demo` submits to a local cluster."""
