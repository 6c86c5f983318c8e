"""The actor host process."""
