"""Lets `python -m larder encode|inspect|key` run the format commands (see larder.cli)."""

from larder.cli import run

if __name__ == "__main__":
    run()
