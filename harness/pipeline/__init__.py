"""One session running and judging scenarios for every front end (``session``), and base against head on one
machine (``base_head``)."""
