"""The FIX dialect of a session: plain FIX 4.4 by default, exsim's extensions when the client
asks for them at logon (docs/gateway-fix.md, "Dialect").

Plain FIX 4.4 is what a stock FIX 4.4 data dictionary (QuickFIX's ``FIX44.xml``) validates:
no field or enumeration value from a later version. The extensions carry information FIX 4.4
has no field for; a client turns them on for one session with ``EXTENSION_TAG=Y`` on its Logon
(the gateway's Logon answer repeats it), and loads a dictionary that declares them
(``merge_dictionary``: the stock FIX44.xml plus ``exsim-fix44-additions.xml``, shipped with the
package).

| item | plain FIX 4.4 | with the extensions |
|---|---|---|
| a fill's trade id | (not sent) | 880 TrdMatchID on the ExecutionReport |
| a stop order triggered | 150=D Restated, 378=99, 58 names the trigger | 150=L (FIX 5.0) |
| a level's position | 290 MDEntryPositionNo | 1023 MDPriceLevel (FIX 5.0) |
| the engine seq of market data | (not sent) | 83 RptSeq on W and in X entries |

Invariants: which dialect a session speaks is fixed at its logon; the bytes of a report depend
only on the report and the dialect.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from importlib import resources

from exsim.exchange.errors import UsageError

__all__ = ["EXTENSION_TAG", "ADDITIONS_FILE", "additions_path", "merge_dictionary",
           "plain_market_data"]

# a user-defined tag (FIX reserves 5000-9999 for bilateral use)
EXTENSION_TAG = 9801
ADDITIONS_FILE = "exsim-fix44-additions.xml"


def plain_market_data(body: list) -> list:
    """Return the body of a W or X message (built with the extensions, marketdata.py) in plain
    FIX 4.4: without 83 RptSeq, and with a level's position as 290 MDEntryPositionNo (FIX 4.4's
    field for it) instead of 1023 MDPriceLevel."""
    return [(290 if t == 1023 else t, v) for t, v in body if t != 83]


def additions_path() -> str:
    """Return the path of the shipped additions file (the fields and values the extensions add
    to FIX 4.4, in QuickFIX's dictionary format)."""
    return str(resources.files("exsim.exchange.gateway.fix").joinpath(ADDITIONS_FILE))


def merge_dictionary(stock_path: str, out_path: str) -> None:
    """Write to ``out_path`` the stock FIX 4.4 dictionary at ``stock_path`` with the exsim
    extensions added (new fields, enum values and the fields they add to each message or
    repeating group). Returns nothing. Raises UsageError if ``stock_path`` is not a FIX 4.4
    QuickFIX dictionary (it cannot be read, or has no ``fields`` / ``messages``)."""
    try:
        stock = ET.parse(stock_path).getroot()
    except (OSError, ET.ParseError) as e:
        raise UsageError(f"cannot read the FIX dictionary {stock_path}: {e}") from None
    add = ET.parse(additions_path()).getroot()
    fields, messages = stock.find("fields"), stock.find("messages")
    if stock.tag != "fix" or stock.get("minor") != "4" or fields is None or messages is None:
        raise UsageError(f"{stock_path} is not a FIX 4.4 QuickFIX dictionary")
    by_number = {f.get("number"): f for f in fields}
    for f in add.find("fields"):
        have = by_number.get(f.get("number"))
        if have is None:
            fields.append(f)
            continue
        known = {v.get("enum") for v in have}
        for v in f:
            if v.get("enum") not in known:
                have.append(v)
    components = {c.get("name"): c for c in stock.find("components") or []}
    by_name = {m.get("name"): m for m in messages}
    for m in add.find("messages"):
        target = by_name.get(m.get("name"))
        if target is None:
            raise UsageError(f"{stock_path} has no message {m.get('name')}")
        for item in m:
            _add_field(target, item, components)
    ET.ElementTree(stock).write(out_path, encoding="utf-8", xml_declaration=True)


def _add_field(parent, item, components) -> None:
    """Add ``item`` (a field, or a group naming fields to add to that group) to ``parent``,
    looking into the components ``parent`` uses (QuickFIX resolves a group inside its
    component)."""
    if item.tag == "field":
        if not any(c.tag == "field" and c.get("name") == item.get("name") for c in parent):
            parent.append(ET.Element("field", name=item.get("name"), required="N"))
        return
    group = _find_group(parent, item.get("name"), components)
    if group is None:
        raise UsageError(f"the stock dictionary has no group {item.get('name')}")
    for sub in item:
        _add_field(group, sub, components)


def _find_group(node, name, components, depth=0):
    if depth > 8:
        return None
    for c in node:
        if c.tag == "group" and c.get("name") == name:
            return c
        if c.tag == "component" and c.get("name") in components:
            found = _find_group(components[c.get("name")], name, components, depth + 1)
            if found is not None:
                return found
    return None


def main(argv: list[str] | None = None) -> int:
    """``python -m exsim.exchange.gateway.fix.dialect STOCK_FIX44.xml OUT.xml``: write the
    merged dictionary. Returns the exit status (2 for bad arguments or input)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m exsim.exchange.gateway.fix.dialect STOCK_FIX44.xml OUT.xml",
              file=sys.stderr)
        return 2
    try:
        merge_dictionary(args[0], args[1])
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
