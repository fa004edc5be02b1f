"""``python -m adiskq``: the ``adiskq`` command line."""

from .cli import main

if __name__ == "__main__":
    main()
