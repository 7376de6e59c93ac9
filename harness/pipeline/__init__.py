"""A scenario through runs and checks outside pytest (evaluate), and base against head on one machine."""
