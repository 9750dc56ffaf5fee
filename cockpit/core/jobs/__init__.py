"""Provides a job from a profile to the cluster: profiles and their overrides, the pre-flight
checklist, the working_dir upload and the submit request."""
