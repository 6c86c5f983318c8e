"""The master process."""
