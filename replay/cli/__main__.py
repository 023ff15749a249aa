"""``python -m exsim.replay.cli``: the ``exsim`` command."""

import sys

from exsim.replay.cli.app import main

if __name__ == "__main__":   # why: worker processes (exsim sweep --scheduler local) import it again
    sys.exit(main())
