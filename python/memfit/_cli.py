"""The ``memfit`` console command: the engine's command-line tool.

``pip install .`` installs it as the ``memfit`` command; ``python -m memfit``
runs it too. It is the same program as the Rust binary (``cargo install
--path crates/memfit-cli``): the same subcommands, options, outputs, exit
statuses (0, 2 on an error, 128 + the signal's number when Ctrl-C, SIGTERM
or SIGHUP stopped it: 130 for Ctrl-C) and messages.
"""

import signal
import sys


def main() -> None:
    """Runs ``memfit`` on ``sys.argv`` and exits with its status."""
    from ._memfit import cli_main

    # The tool's own handler stops a run cleanly on Ctrl-C; Python's would
    # then raise KeyboardInterrupt (a traceback) after the clean stop.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(cli_main(["memfit", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
