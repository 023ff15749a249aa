"""``python -m replay.cli``: the ``exsim`` command."""

import sys

from replay.cli.main import main

sys.exit(main())
