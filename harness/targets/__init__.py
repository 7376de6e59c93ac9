"""The system under test: which verl and msprobe (spec), their cached environment, what the environment offers
(probe, dialect), the sandbox their code runs in, and verl's first-parent commits (``commits``: bisect)."""
