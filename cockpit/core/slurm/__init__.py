"""Provides Slurm: a job read from `scontrol`/`squeue` (state, hosts, walltime) and the sbatch script
of `cockpit slurm up`."""
