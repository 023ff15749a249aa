"""Regenerate docs/cli.md from the ``exsim`` parser's own ``--help`` output.

Usage: python scripts/gen_cli_docs.py [PATH]      (default: docs/cli.md of this checkout)
tests/test_cli_docs.py fails when the committed file differs from what this writes.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from replay.cli import write_docs  # noqa: E402  (after the path fix, so a checkout works uninstalled)

if __name__ == "__main__":
    print(f"wrote {write_docs(sys.argv[1] if len(sys.argv) > 1 else None)}")
