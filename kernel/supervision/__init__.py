"""Worker processes: spawn, the I/O thread, the process tree, and the model and tool handles."""
