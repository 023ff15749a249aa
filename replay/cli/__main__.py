"""``python -m exsim.replay.cli``: the ``exsim`` command."""

import sys

from exsim.replay.cli.app import main

sys.exit(main())
