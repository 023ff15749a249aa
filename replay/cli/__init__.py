"""The ``exsim`` command line: one module per command group, each a thin layer over the library.

``main`` (replay/cli/app.py) builds the parser from the commands' ``register`` functions and
maps errors to exit statuses; the library (``exchange``, ``store``, ``replay``, ``scenarios``)
never imports this package.
"""

from exsim.replay.cli.app import main

__all__ = ["main"]
