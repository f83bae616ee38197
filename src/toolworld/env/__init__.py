"""The environment an agent acts in: a world episode with a user simulator, limits and noise around it."""
