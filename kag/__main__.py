"""`python -m kag`: the `kag` command."""

from kag.cli import main

if __name__ == "__main__":
    main()
