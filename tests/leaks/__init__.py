"""Start/close cycles that must leave no task or file descriptor behind."""
