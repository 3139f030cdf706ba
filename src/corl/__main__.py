"""`python -m corl ...` (what torchrun launches) is the `corl` command."""

from corl.cli import main

if __name__ == "__main__":
    main()
