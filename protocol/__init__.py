"""Pure types and codecs: log records (events) and kernel<->worker messages. No I/O."""
