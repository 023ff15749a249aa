"""``python -m replay.cli``: the ``exsim`` command."""

import sys

from replay.cli.app import main

sys.exit(main())
