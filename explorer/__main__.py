"""``python -m explorer``: the same command line as ``explorer``."""

from explorer.cli import main

if __name__ == "__main__":
    main(prog_name="explorer")
