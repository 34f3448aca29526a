"""Plumbing that reaches the node: the one command runner and the transport seam (local, SSH, docker exec)."""
