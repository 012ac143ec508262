"""The claims engine: judging ownership, the one compare-and-swap write path, acquire, first-
free, requests and waiting."""
