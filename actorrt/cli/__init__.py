"""The actorrt command line."""
