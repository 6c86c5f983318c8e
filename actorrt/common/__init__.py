"""What every actorrt process shares."""
