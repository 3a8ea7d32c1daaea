"""flowsolver: what a GPU cluster's network costs you.

Cluster graphs come from :mod:`topologies`; flowsolver routes traffic over them, solves
max-min fair bandwidth sharing and turns the rates into collective and training-step
times. Units everywhere: bytes, seconds, bytes/s.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
