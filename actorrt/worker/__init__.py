"""The worker daemon process."""
