"""The Trio shell: the tasks, sockets and timers that carry out what the sans-I/O core
in ``_core/`` decides."""
