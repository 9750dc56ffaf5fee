"""Provides `cockpit check`: what will and will not work on a cluster, found before the user needs it.

`findings` (one line per check: host, PASS/FAIL/WARN/SKIP, the fix), `node_program` (what each machine
runs, in one go: py-spy, ptrace, debugpy, GPUs, its clock), the pure rules from what was found to
findings (`way_in`: SSH, host key, token, dashboard, job fields; `verdicts`: each machine's) and `run`
(every check at once, each under its deadline).
"""
