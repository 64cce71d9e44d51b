"""The C search core's typed wrapper (over brainbot._kernel) and its numpy twins."""
