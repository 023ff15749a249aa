"""``exsim warmup``: compile every numba kernel ahead of use (a Dockerfile, a CI image, before
a demo to an audience).

Invariants: it prints each group's time to stdout and where the cache is; on a warm cache it
finishes in seconds and compiles nothing; it never writes outside numba's cache and a temporary
directory it removes (``replay.warmup``).
"""

from __future__ import annotations

import sys

from exsim.exchange import compiling

from exsim.replay.cli.common import EXIT_FAILED, EXIT_OK

__all__ = ["register", "cmd_warmup"]

EXAMPLES = """\
examples:
  exsim warmup                      # every group, as many at once as cores and memory allow
  exsim warmup --groups engine,verify --jobs 1 -q    # quiet: e.g. a Dockerfile's RUN step
"""


def register(sub, parents, formatter) -> None:
    """Add the ``warmup`` subcommand to the ``sub`` subparsers action."""
    from exsim.replay.warmup import GROUPS

    p = sub.add_parser(
        "warmup", parents=parents, formatter_class=formatter, epilog=EXAMPLES,
        help="compile the numba kernels ahead of use (once per install)",
        description="Compile exsim's numba kernels into numba's on-disk cache, so that no later "
                    "command\ncompiles. The engine group runs first (it writes a small data "
                    "directory the others read);\nthe other groups then compile in up to JOBS "
                    "child processes at once.")
    p.add_argument("--groups", default=",".join(GROUPS), metavar="LIST",
                   help=f"comma-separated kernel groups (default: all: {','.join(GROUPS)})")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="groups compiled at once after the engine (default: the cores, at most "
                        "one per 4.5 GB\nof available memory)")
    p.set_defaults(func=cmd_warmup)


def cmd_warmup(args) -> int:
    """``exsim warmup``: returns 0, or 1 when a group failed (its error on stderr). Raises
    UsageError for an unknown group or --jobs < 1."""
    from exsim.replay.warmup import warmup

    groups = [g for g in args.groups.split(",") if g]
    print(f"numba cache: {compiling.cache_location()}")

    def tell(group, seconds):
        print(f"  {group:<9} {seconds:7.1f} s", flush=True)

    try:
        done = warmup(groups, jobs=args.jobs, progress=tell)
    except RuntimeError as e:   # a group that fails is a bug to report, not a traceback
        print(f"exsim: warmup failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    print(f"warmed up {len(done)} group(s) in {sum(done.values()):.1f} s "
          f"({compiling.compiled_seconds():.1f} s compiling in this process)")
    return EXIT_OK
