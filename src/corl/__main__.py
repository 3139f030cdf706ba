"""`python -m corl ...` (what torchrun launches) is the `corl` command."""

from corl.cli import app

if __name__ == "__main__":
    app()
