"""The `sciga` command line (cli.py) and the composition of each job; no domain logic."""
