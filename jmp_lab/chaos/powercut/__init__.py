"""The power-cut simulator: a FUSE filesystem that forgets what was never made durable.

`LossyDisk` (control.py) runs a daemon (daemon.py) that mounts a backing directory through
`LossyFS` (fs.py: file data; names.py: directory entries; fsbase.py: metadata and helpers;
gate.py: freezes, faults and triggers). Every operation passes through, and the durable image
is kept beside it (model.py): file data as of its last fsync, directory entries by the
model's rules (strict POSIX, a file's fsync naming it, a journal). A cut (cut.py) takes that
image and the daemon rewrites the backing directory to it (backing.py). docs/RESILIENCE.md
says what it models and what it does not.
"""
