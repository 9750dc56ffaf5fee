"""The runs overview: every target of the user (the local cluster, their Slurm jobs holding a Ray
cluster, the hosts of the config, the targets used recently), each looked at once, lightly
(`overview`); `recent` keeps the targets used recently."""
