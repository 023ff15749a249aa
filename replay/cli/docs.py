"""Regenerate docs/cli.md from the ``exsim`` parser's own ``--help`` output.

    python -m exsim.replay.cli.docs [PATH]      (default: docs/cli.md of this checkout)

tests/cli_tests/test_cli_docs.py fails when the committed file differs from what this writes.
"""

import sys

from exsim.replay.cli.app import write_docs

if __name__ == "__main__":
    print(f"wrote {write_docs(sys.argv[1] if len(sys.argv) > 1 else None)}")
