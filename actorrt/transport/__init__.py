"""How bytes travel between actorrt processes."""
