"""`python -m sciga`: the `sciga` command line (pipelines/cli.py), also from a checkout without installing."""

from sciga.pipelines.cli import run

if __name__ == "__main__":
    run()
