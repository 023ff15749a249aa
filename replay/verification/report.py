"""What ``verify`` returns: the ``VerifyReport`` and its ``Violation`` rows.

Plain data, shared by every module of the verification (``replay.verification.symbol`` makes
the kernel's violation rows into ``Violation``s, ``replay.verification.run`` builds the report);
it imports none of them. Invariants: ``ok`` is true exactly when ``summary["violations"]`` counts
no violation of any rule; ``violations`` holds at most ``max_violations`` rows, in seq order;
``split`` says how the work was divided and is not compared (the findings are the same for any
split).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exsim.exchange.errors import VerificationError

__all__ = ["Violation", "VerifyReport"]


@dataclass(frozen=True)
class Violation:
    """One failed check: the seq of the message concerned, the rule's name and what was seen."""

    seq: int
    rule: str
    detail: str


@dataclass(repr=False)
class VerifyReport:
    """Result of ``verify``: ok, the violations found (first ``max_violations``), a summary."""

    def __repr__(self) -> str:
        """One line: what a notebook or a log shows (the arrays are summarised)."""
        from exsim.replay import reprs
        return reprs.verify_report_repr(self)

    def _repr_html_(self) -> str:
        from exsim.replay import reprs
        return reprs.verify_report_html(self)

    ok: bool
    violations: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    # how ``verify`` split the work (threads, blocks, blocks kept as checked ahead, blocks
    # checked again): not part of the findings, which are the same for every split
    split: dict = field(default_factory=dict, compare=False)

    def raise_if_failed(self) -> None:
        """Raise VerificationError naming the first violations if the run did not verify."""
        if not self.ok:
            head = "; ".join(f"seq {v.seq} {v.rule}: {v.detail}" for v in self.violations[:3])
            total = sum(self.summary.get("violations", {}).values())
            raise VerificationError(f"{total} violation(s): {head}")
