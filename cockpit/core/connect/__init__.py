"""Provides TARGET (an SSH destination, a dashboard URL, `slurm:JOB`, `local`) and the open connection
to its head: the dashboard client over the tunnel, and programs run on the cluster's nodes."""
