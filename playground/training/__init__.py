"""Training: corpus, trainer (one process or torchrun), losses, time estimates, the command line."""
