"""``exsim docs``: the documentation pages, as installed with the package.

The pages are docs/*.md and README.md of the source tree, shipped in the wheel as package data
(pyproject.toml), so an installed exsim can show the pages its ``--help`` texts and errors
point to: ``exsim docs`` lists them, ``exsim docs PAGE`` prints one (``cli``, ``cli.md`` or
``docs/cli.md`` all name docs/cli.md; ``readme`` names README.md), ``exsim docs --path PAGE``
prints where it is.

Invariants: a page is read from the installed package only, never from the working directory;
an unknown page is a UsageError listing the pages there are.
"""

from __future__ import annotations

import os
from pathlib import Path

from exsim.exchange.errors import UsageError

from exsim.replay.cli.common import EXIT_OK, print_table

__all__ = ["register", "cmd_docs", "pages", "page_path"]

EXAMPLES = """\
examples:
  exsim docs                     # the pages, with their titles
  exsim docs backtesting         # print docs/backtesting.md
  exsim docs --path scenarios    # where docs/scenarios.md is installed
"""

ROOT = Path(__file__).resolve().parents[2]   # the exsim package: README.md and docs/ are here


def pages() -> dict[str, Path]:
    """Return {page name: path} of the installed pages: ``readme`` and each docs/NAME.md as
    NAME, sorted by name; {} when none are installed."""
    found = {}
    readme = ROOT / "README.md"
    if readme.is_file():
        found["readme"] = readme
    docs = ROOT / "docs"
    if docs.is_dir():
        for p in sorted(docs.glob("*.md")):
            found[p.stem] = p
    return found


def page_path(name: str) -> Path:
    """Return the path of page ``name`` (``cli``, ``cli.md``, ``docs/cli.md``, ``readme``).

    Raises UsageError naming the pages there are when there is no such page."""
    have = pages()
    key = os.path.basename(str(name).strip()).lower()
    key = key[:-3] if key.endswith(".md") else key
    if key in have:
        return have[key]
    if not have:
        raise UsageError(f"docs {name}: this installation holds no documentation pages "
                         f"(looked in {ROOT / 'docs'})")
    raise UsageError(f"docs {name}: no such page; pages: {', '.join(have)}")


def _title(path: Path) -> str:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("# "):
                return line[2:].strip()
    return ""


def register(sub, parents, formatter) -> None:
    """Add the ``docs`` subcommand to the ``sub`` subparsers action."""
    p = sub.add_parser(
        "docs", parents=parents, formatter_class=formatter, epilog=EXAMPLES,
        help="list or print the documentation pages installed with exsim",
        description="Without PAGE, list the documentation pages (README.md and docs/*.md, "
                    "installed with the\npackage); with PAGE, print that page (Markdown).")
    p.add_argument("page", nargs="?", metavar="PAGE",
                   help="page name: readme, cli, backtesting, scenarios, ... (with or without .md)")
    p.add_argument("--path", action="store_true", help="print the page's file path instead")
    p.set_defaults(func=cmd_docs)


def cmd_docs(args) -> int:
    """``exsim docs``: list or print a page; returns 0. Raises UsageError for an unknown page."""
    if args.page is None:
        have = pages()
        if not have:
            raise UsageError(f"this installation holds no documentation pages (looked in "
                             f"{ROOT / 'docs'})")
        print_table(["page", "title"], [(name, _title(path)) for name, path in have.items()],
                    right=[False, False])
        print("exsim docs PAGE prints one")
        return EXIT_OK
    path = page_path(args.page)
    if args.path:
        print(path)
        return EXIT_OK
    with open(path, encoding="utf-8") as f:
        print(f.read(), end="")
    return EXIT_OK
