"""The warm worker pool: a per-user process that has imported the workers' SDKs and forks a
fresh worker per kernel request (`python -m workers.pool start | stop | status | serve`).

`server` accepts kernels, checks each request and forks (`Pool`); `conn` owns the connections
and their framing; `child` is what a fork does before it runs the worker module (and what the
pool preloads); `takeon` is what a fork takes on from its kernel (limits, umask, priority, CPUs,
cgroup); `cli` holds the commands and the pool's lock, pid and log files.
"""
