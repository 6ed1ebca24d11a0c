"""``python -m memfit``: the ``memfit`` command-line tool."""

from ._cli import main

main()
