#!/usr/bin/env python3
"""A mock Anthropic Messages API (POST /v1/messages, whole JSON responses) that applies the
prompt-caching rules and reports what a session would have read from and written to the cache.
bench/prompt_cache.sh runs `pev agent` against it to measure the cached share of prompt tokens.

The caching rules (Anthropic, "Prompt caching", platform.claude.com/docs/en/build-with-claude/
prompt-caching; the figures below were checked against that page's text as quoted by several
third-party copies, since the page itself was out of reach):

1. The cacheable prefix is the request in the order tools, system, messages, block by block:
   every tool definition, every system text block and every message content block is one block
   (a string `content` is one text block). The prefix "up to block i" is every block from the
   first tool to block i, and it is keyed by its exact content and the model (caches are per
   model). `tool_choice` is part of the key of the message blocks only (the docs' table of what
   invalidates what: changing it keeps the tools and system cache, drops the messages cache).
2. A block with `cache_control` is a breakpoint. More than 4 in one request is refused with the
   API's 400 body ("A maximum of 4 blocks with cache_control may be provided. Found N.").
3. At each breakpoint the API looks for a cache entry for the prefix ending there or, failing
   that, ending at an earlier block boundary, at most LOOKBACK (20) blocks back, the breakpoint's
   own block counted as the first of the 20 ("the system automatically checks for cache hits at
   all previous content block boundaries, up to about 20 blocks before your explicit
   breakpoint"). The longest prefix found over all breakpoints is read:
   `cache_read_input_tokens`.
4. Entries are written only at breakpoints: at every breakpoint past the hit, the prefix ending
   there is stored, and `cache_creation_input_tokens` is the tokens from the end of the hit to
   the last breakpoint written. Tokens after the last breakpoint are `input_tokens`.
5. A prefix shorter than the model's minimum cacheable length is not cached ("processed
   without caching, and no error is returned": no entry, its tokens count as plain input). The
   minimums as the page lists them today: 1024 tokens for Claude Sonnet 4.5 and 4.6 and Opus 4
   and 4.1; 2048 for Opus 4.7 and Haiku 3/3.5; 4096 for Opus 4.5 and 4.6 and Haiku 4.5. Older
   copies of the page say 1024 for every Sonnet and Opus and 2048 for every Haiku, and one
   report (anthropics/anthropic-sdk-python#1194) saw Sonnet 4.6 cache only from 2048.
   --min-tokens N replaces the table with one minimum for every model.
6. An entry lives 5 minutes (TTL) from its last use; a read refreshes it.

Token counts are an estimate, not Anthropic's tokenizer: a block counts as
ceil(len(canonical JSON) / 4) tokens, where the canonical JSON is the block without its
`cache_control`, keys sorted, no spaces, non-ASCII kept (`json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False)`). Message roles, the request's other fields and
Anthropic's own per-request overhead are not counted. The shares are ratios of these counts.

--mode before ignores `cache_control` on message blocks (what pev sent before issue 11: the
system prompt and the tool list only), so one pev binary gives both figures. The count of
breakpoints (rule 2) is still taken over the request as sent.

The scripted model. Roles are told apart by the request's `model`, as in bench/mock_model.py:
claude-opus-4-6 plans, claude-sonnet-4-5 executes (and runs loop mode, which uses the executor
role), claude-haiku-4-5 judges. Every answer depends only on the request (the turn is the number
of assistant messages so far), and the workspace the calls work on is the one
`--write-workspace DIR` writes (a small Python package of files of a few KB), so the tool results
pev sends back are real.

  loop mode (the request offers plan_create): 25 calls: plan_create (5 steps with assertions,
    2 postconditions), file_list, file reads, patches and a write, step_update in_progress and
    done with evidence, postcondition_verify twice, a final summary.
  plan mode: the planner answers a one-step plan (one instruction step with assertions and an
    acceptance criterion); the executor makes 9 tool calls in 9 turns and summarises in the
    10th; the judge passes.

GET /stats: per role, the calls and the tokens: input (plain), cache_read, cache_write and
prompt (their sum). GET /calls: one record per call (role, turn, blocks, breakpoints, the hit's
position and the counts). POST /reset empties the cache, the stats and the log. The listening
port is printed on stdout as `port N` once the server is ready.

Usage: cache_mock.py [--port 0] [--mode after|before] [--lookback 20] [--ttl 300]
                     [--min-tokens N] [--write-workspace DIR]
Only the Python standard library is used.
"""

import argparse
import hashlib
import json
import math
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PLANNER = "claude-opus-4-6"
EXECUTOR = "claude-sonnet-4-5"
VERIFIER = "claude-haiku-4-5"
ROLES = {PLANNER: "planner", EXECUTOR: "executor", VERIFIER: "verifier"}

MAX_BREAKPOINTS = 4

# Minimum cacheable prompt length per model (rule 5), by model-name prefix, longest first.
MIN_TOKENS = [
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-7", 2048),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 1024),
    ("claude-sonnet-4-5", 1024),
    ("claude-sonnet-4", 1024),
    ("claude-opus-4", 1024),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
]


def min_tokens(model, override):
    if override is not None:
        return override
    for prefix, n in MIN_TOKENS:
        if model.startswith(prefix):
            return n
    return 1024


def canonical(block):
    """The block as the cache keys and counts it: without cache_control, keys sorted."""
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tokens_of(text):
    return math.ceil(len(text) / 4)


def marked(block):
    return isinstance(block, dict) and block.get("cache_control") not in (None, {})


def flatten(body, mode):
    """The request's blocks in cache order: (kind, canonical JSON, is a breakpoint, marked as sent)."""
    out = []
    for tool in body.get("tools") or []:
        out.append(("tool", canonical(tool), marked(tool), marked(tool)))
    system = body.get("system")
    if isinstance(system, str):
        if system:
            out.append(("system", canonical({"type": "text", "text": system}), False, False))
    else:
        for block in system or []:
            out.append(("system", canonical(block), marked(block), marked(block)))
    choice = canonical(body.get("tool_choice"))
    first = True
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content or []:
            kind = f"msg:{message.get('role')}"
            if first:
                # tool_choice keys the message blocks (rule 1).
                kind += f":{choice}"
                first = False
            sent = marked(block)
            out.append((kind, canonical(block), sent and mode == "after", sent))
    return out


class Cache:
    """The prompt cache of one organisation: prefix key -> (tokens, expiry)."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.entries = {}
            self.stats = {}
            self.log = []

    def account(self, body, role, turn):
        """Applies the rules to one request: (usage dict, log record), or a refusal message."""
        blocks = flatten(body, self.args.mode)
        sent_marks = sum(1 for b in blocks if b[3])
        if sent_marks > MAX_BREAKPOINTS:
            return None, (
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {sent_marks}."
            )
        model = body.get("model", "")
        floor = min_tokens(model, self.args.min_tokens)
        keys, cum = [], []
        h = hashlib.sha256(model.encode()).digest()
        total = 0
        for kind, text, _, _ in blocks:
            h = hashlib.sha256(h + kind.encode() + b"\0" + text.encode()).digest()
            total += tokens_of(text)
            keys.append(h)
            cum.append(total)
        breakpoints = [i for i, b in enumerate(blocks) if b[2]]
        now = time.monotonic()
        with self.lock:
            live = lambda k: k in self.entries and self.entries[k] > now
            hit = -1
            for bp in breakpoints:
                for j in range(bp, max(-1, bp - self.args.lookback), -1):
                    if live(keys[j]):
                        hit = max(hit, j)
                        break
            read = cum[hit] if hit >= 0 else 0
            if hit >= 0:
                self.entries[keys[hit]] = now + self.args.ttl
            for bp in breakpoints:
                if bp < hit and live(keys[bp]):
                    self.entries[keys[bp]] = now + self.args.ttl
            written = [bp for bp in breakpoints if bp > hit and cum[bp] >= floor]
            for bp in written:
                self.entries[keys[bp]] = now + self.args.ttl
            write = cum[written[-1]] - read if written else 0
            plain = total - read - write
            s = self.stats.setdefault(
                role, {"calls": 0, "input": 0, "cache_read": 0, "cache_write": 0, "prompt": 0}
            )
            s["calls"] += 1
            s["input"] += plain
            s["cache_read"] += read
            s["cache_write"] += write
            s["prompt"] += total
            record = {
                "role": role, "turn": turn, "blocks": len(blocks), "breakpoints": breakpoints,
                "sent_marks": sent_marks, "hit": hit, "min_tokens": floor, "prompt": total,
                "input": plain, "cache_read": read, "cache_write": write,
                "breakpoint_tokens": [cum[bp] for bp in breakpoints],
            }
            self.log.append(record)
        usage = {"input_tokens": plain, "cache_read_input_tokens": read,
                 "cache_creation_input_tokens": write}
        return usage, record

    def snapshot(self):
        with self.lock:
            return {"mode": self.args.mode, "roles": json.loads(json.dumps(self.stats))}


# --------------------------------------------------------------------------------------------
# The workspace: a small Python package, files of a few KB. The scripted calls below patch these
# exact texts, so they live in one place.

FIELDS = [
    ("sku", "str", "Stock keeping unit, unique per item (letters, digits and dashes)."),
    ("name", "str", "What the item is called on labels and in listings."),
    ("quantity", "int", "Units on hand; never negative."),
    ("unit_price", "Decimal", "Price of one unit in the store's currency, two decimals."),
    ("location", "str", "Aisle and shelf, such as 'A3-2'."),
    ("reorder_level", "int", "Reorder when the quantity falls to this level."),
    ("supplier", "str", "The supplier's short code."),
    ("tags", "list[str]", "Free-form labels used by the search command."),
]


def models_py():
    lines = [
        '"""The inventory\'s data model: items, their validation and their JSON form."""',
        "",
        "from __future__ import annotations",
        "",
        "import re",
        "from dataclasses import dataclass, field",
        "from decimal import Decimal, InvalidOperation",
        "",
        'SKU_PATTERN = re.compile(r"^[A-Z0-9][A-Z0-9-]{2,31}$")',
        'LOCATION_PATTERN = re.compile(r"^[A-Z][0-9]{1,2}-[0-9]{1,2}$")',
        "",
        "",
        "class ValidationError(ValueError):",
        '    """An item that breaks one of the rules below."""',
        "",
        "",
        "@dataclass",
        "class Item:",
        '    """One line of the inventory."""',
        "",
    ]
    for name, kind, doc in FIELDS:
        default = " = field(default_factory=list)" if kind.startswith("list") else ""
        if name in ("reorder_level",):
            default = " = 0"
        if name in ("supplier", "location"):
            default = ' = ""'
        lines.append(f"    {name}: {kind}{default}")
        lines.append(f'    """{doc}"""')
    lines += [
        "",
        "    def validate(self) -> None:",
        '        """Raise ValidationError if a field breaks a rule."""',
        "        if not SKU_PATTERN.match(self.sku):",
        '            raise ValidationError(f"bad sku {self.sku!r}")',
        "        if not self.name.strip():",
        '            raise ValidationError(f"{self.sku}: the name is empty")',
        "        if self.quantity < 0:",
        '            raise ValidationError(f"{self.sku}: negative quantity {self.quantity}")',
        "        if self.unit_price < 0:",
        '            raise ValidationError(f"{self.sku}: negative price {self.unit_price}")',
        "        if self.location and not LOCATION_PATTERN.match(self.location):",
        '            raise ValidationError(f"{self.sku}: bad location {self.location!r}")',
        "        if self.reorder_level < 0:",
        '            raise ValidationError(f"{self.sku}: negative reorder level")',
        "",
        "    def value(self) -> Decimal:",
        '        """What the units on hand are worth."""',
        "        return self.unit_price * self.quantity",
        "",
        "    def needs_reorder(self) -> bool:",
        "        return self.quantity <= self.reorder_level",
        "",
        "    def to_json(self) -> dict:",
        "        return {",
    ]
    for name, kind, _ in FIELDS:
        conv = f"str(self.{name})" if kind == "Decimal" else (
            f"list(self.{name})" if kind.startswith("list") else f"self.{name}")
        lines.append(f'            "{name}": {conv},')
    lines += [
        "        }",
        "",
        "    @classmethod",
        "    def from_json(cls, data: dict) -> Item:",
        "        try:",
        '            price = Decimal(str(data.get("unit_price", "0")))',
        "        except InvalidOperation as e:",
        '            raise ValidationError(f"bad price in {data!r}") from e',
        "        item = cls(",
        '            sku=str(data["sku"]),',
        '            name=str(data.get("name", "")),',
        '            quantity=int(data.get("quantity", 0)),',
        "            unit_price=price,",
        '            location=str(data.get("location", "")),',
        '            reorder_level=int(data.get("reorder_level", 0)),',
        '            supplier=str(data.get("supplier", "")),',
        '            tags=[str(t) for t in data.get("tags", [])],',
        "        )",
        "        item.validate()",
        "        return item",
        "",
    ]
    return "\n".join(lines)


def store_py():
    methods = [
        ("add", "item: Item", "None", "Add a new item; its sku must not be in the store yet.", [
            "item.validate()",
            "if item.sku in self._items:",
            '    raise KeyError(f"{item.sku} is already in the store")',
            "self._items[item.sku] = item",
            "self._dirty = True",
        ]),
        ("remove", "sku: str", "Item", "Remove an item and return it.", [
            "item = self._items.pop(sku)",
            "self._dirty = True",
            "return item",
        ]),
        ("get", "sku: str", "Item", "The item with this sku (KeyError if there is none).", [
            "return self._items[sku]",
        ]),
        ("receive", "sku: str, units: int", "Item", "Book units received from a supplier.", [
            "if units <= 0:",
            '    raise ValueError("units received must be positive")',
            "item = self._items[sku]",
            "item.quantity += units",
            "self._dirty = True",
            "return item",
        ]),
        ("ship", "sku: str, units: int", "Item", "Book units shipped; refuse to go below zero.", [
            "item = self._items[sku]",
            "if units > item.quantity:",
            '    raise ValueError(f"{sku}: only {item.quantity} on hand, {units} asked")',
            "item.quantity -= units",
            "self._dirty = True",
            "return item",
        ]),
        ("search", "text: str", "list[Item]", "Items whose name, sku or tags contain text.", [
            "needle = text.casefold()",
            "return [",
            "    item",
            "    for item in self._items.values()",
            "    if needle in item.name.casefold()",
            "    or needle in item.sku.casefold()",
            "    or any(needle in t.casefold() for t in item.tags)",
            "]",
        ]),
        ("to_reorder", "", "list[Item]", "Items at or below their reorder level, by sku.", [
            "return sorted(",
            "    (i for i in self._items.values() if i.needs_reorder()), key=lambda i: i.sku",
            ")",
        ]),
        ("total_value", "", "Decimal", "What the whole stock is worth.", [
            'return sum((i.value() for i in self._items.values()), Decimal("0"))',
        ]),
    ]
    lines = [
        '"""The inventory store: items by sku, saved as one JSON file."""',
        "",
        "from __future__ import annotations",
        "",
        "import json",
        "import os",
        "import tempfile",
        "from decimal import Decimal",
        "from pathlib import Path",
        "",
        "from .models import Item, ValidationError",
        "",
        "FORMAT_VERSION = 2",
        "",
        "",
        "class Store:",
        '    """All items, loaded from and saved to `path`."""',
        "",
        "    def __init__(self, path: Path):",
        "        self.path = Path(path)",
        "        self._items: dict[str, Item] = {}",
        "        self._dirty = False",
        "",
        "    @classmethod",
        "    def open(cls, path: Path) -> Store:",
        "        store = cls(path)",
        "        if store.path.exists():",
        "            store.load()",
        "        return store",
        "",
        "    def load(self) -> None:",
        "        data = json.loads(self.path.read_text(encoding=\"utf-8\"))",
        '        if data.get("version") != FORMAT_VERSION:',
        '            raise ValidationError(f"unsupported format {data.get(\'version\')!r}")',
        '        self._items = {d["sku"]: Item.from_json(d) for d in data["items"]}',
        "        self._dirty = False",
        "",
        "    def save(self) -> None:",
        '        """Write the store atomically: a temporary file, then a rename."""',
        "        if not self._dirty:",
        "            return",
        "        payload = {",
        '            "version": FORMAT_VERSION,',
        '            "items": [self._items[k].to_json() for k in sorted(self._items)],',
        "        }",
        "        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=\".tmp\")",
        '        with os.fdopen(fd, "w", encoding="utf-8") as f:',
        "            json.dump(payload, f, indent=2, sort_keys=True)",
        '            f.write("\\n")',
        "        os.replace(tmp, self.path)",
        "        self._dirty = False",
        "",
        "    def __len__(self) -> int:",
        "        return len(self._items)",
        "",
        "    def __iter__(self):",
        "        return iter(sorted(self._items.values(), key=lambda i: i.sku))",
        "",
    ]
    for name, params, ret, doc, body in methods:
        sig = f"self, {params}" if params else "self"
        lines.append(f"    def {name}({sig}) -> {ret}:")
        lines.append(f'        """{doc}"""')
        lines += [f"        {b}" for b in body]
        lines.append("")
    return "\n".join(lines)


def cli_py():
    commands = [
        ("list", "List every item with its quantity, price and value."),
        ("show", "Show one item in full."),
        ("add", "Add an item from --sku, --name, --quantity and --price."),
        ("receive", "Book units received."),
        ("ship", "Book units shipped."),
        ("search", "Find items by name, sku or tag."),
        ("reorder", "List the items to reorder."),
        ("value", "Print what the whole stock is worth."),
    ]
    lines = [
        '"""The `inventory` command line."""',
        "",
        "from __future__ import annotations",
        "",
        "import argparse",
        "import sys",
        "from decimal import Decimal",
        "from pathlib import Path",
        "",
        "from .models import Item, ValidationError",
        "from .store import Store",
        "",
        'DEFAULT_PATH = Path("inventory.json")',
        "",
        "",
        "def format_row(item: Item) -> str:",
        '    """One line of `inventory list`."""',
        "    return (",
        '        f"{item.sku:<12} {item.name:<28} {item.quantity:>6} "',
        '        f"{item.unit_price:>9.2f} {item.value():>11.2f}"',
        "    )",
        "",
        "",
        "def parser() -> argparse.ArgumentParser:",
        '    p = argparse.ArgumentParser(prog="inventory", description=__doc__)',
        '    p.add_argument("--store", type=Path, default=DEFAULT_PATH)',
        '    sub = p.add_subparsers(dest="command", required=True)',
    ]
    for name, help_text in commands:
        lines.append(f'    c = sub.add_parser("{name}", help="{help_text}")')
        if name in ("show", "receive", "ship"):
            lines.append('    c.add_argument("sku")')
        if name in ("receive", "ship"):
            lines.append('    c.add_argument("units", type=int)')
        if name == "search":
            lines.append('    c.add_argument("text")')
        if name == "add":
            for opt, typ in (("sku", "str"), ("name", "str"), ("quantity", "int"), ("price", "Decimal")):
                lines.append(f'    c.add_argument("--{opt}", type={typ}, required=True)')
    lines += [
        "    return p",
        "",
        "",
        "def main(argv: list[str] | None = None) -> int:",
        "    args = parser().parse_args(argv)",
        "    store = Store.open(args.store)",
        "    try:",
        '        if args.command == "list":',
        "            for item in store:",
        "                print(format_row(item))",
        '        elif args.command == "show":',
        "            for key, value in store.get(args.sku).to_json().items():",
        '                print(f"{key:>14}: {value}")',
        '        elif args.command == "add":',
        "            store.add(Item(args.sku, args.name, args.quantity, args.price))",
        '        elif args.command == "receive":',
        "            store.receive(args.sku, args.units)",
        '        elif args.command == "ship":',
        "            store.ship(args.sku, args.units)",
        '        elif args.command == "search":',
        "            for item in store.search(args.text):",
        "                print(format_row(item))",
        '        elif args.command == "reorder":',
        "            for item in store.to_reorder():",
        "                print(format_row(item))",
        '        elif args.command == "value":',
        '            print(f"{store.total_value():.2f}")',
        "        store.save()",
        "    except (KeyError, ValueError, ValidationError) as e:",
        '        print(f"inventory: {e}", file=sys.stderr)',
        "        return 1",
        "    return 0",
        "",
        "",
        'if __name__ == "__main__":',
        "    sys.exit(main())",
        "",
    ]
    return "\n".join(lines)


def test_store_py():
    cases = [
        ("add_then_get", 'store.add(item("A-100"))', 'assert store.get("A-100").name == "Widget A-100"'),
        ("add_twice_refused", 'store.add(item("A-101"))', 'with pytest.raises(KeyError):\n        store.add(item("A-101"))'),
        ("receive_adds_units", 'store.add(item("A-102", quantity=3))\n    store.receive("A-102", 4)', 'assert store.get("A-102").quantity == 7'),
        ("ship_removes_units", 'store.add(item("A-103", quantity=5))\n    store.ship("A-103", 2)', 'assert store.get("A-103").quantity == 3'),
        ("ship_too_many_refused", 'store.add(item("A-104", quantity=1))', 'with pytest.raises(ValueError):\n        store.ship("A-104", 2)'),
        ("search_by_tag", 'store.add(item("A-105", tags=["garden"]))', 'assert [i.sku for i in store.search("GARD")] == ["A-105"]'),
        ("reorder_list", 'store.add(item("A-106", quantity=1, reorder_level=2))\n    store.add(item("A-107", quantity=9, reorder_level=2))', 'assert [i.sku for i in store.to_reorder()] == ["A-106"]'),
        ("total_value", 'store.add(item("A-108", quantity=2, price="1.50"))\n    store.add(item("A-109", quantity=1, price="0.25"))', 'assert store.total_value() == Decimal("3.25")'),
        ("save_and_load", 'store.add(item("A-110", tags=["x", "y"]))\n    store.save()', 'again = Store.open(store.path)\n    assert again.get("A-110").tags == ["x", "y"]'),
        ("bad_sku_refused", "pass", 'with pytest.raises(ValidationError):\n        store.add(item("a b"))'),
    ]
    lines = [
        '"""Tests of the store: booking, search, reorder and the JSON file."""',
        "",
        "from decimal import Decimal",
        "",
        "import pytest",
        "",
        "from inventory.models import Item, ValidationError",
        "from inventory.store import Store",
        "",
        "",
        "def item(sku, quantity=10, price=\"2.00\", reorder_level=0, tags=()):",
        "    return Item(sku, f\"Widget {sku}\", quantity, Decimal(price), \"A1-1\", reorder_level,",
        "                \"ACME\", list(tags))",
        "",
        "",
        "@pytest.fixture",
        "def store(tmp_path):",
        '    return Store(tmp_path / "inventory.json")',
        "",
    ]
    for name, setup, check in cases:
        lines += ["", f"def test_{name}(store):", f"    {setup}", f"    {check}", ""]
    return "\n".join(lines)


README = """# inventory

A small stock-keeping tool for a workshop store room: items by SKU, what is on hand, what it is
worth and what to reorder. The whole store is one JSON file (`inventory.json` by default), written
atomically, so a crash never leaves half a file.

## Install

```sh
python -m pip install -e .
```

Python 3.10 or newer. No dependencies outside the standard library (pytest for the tests).

## Usage

```sh
inventory add --sku A-100 --name "Hex bolt M6" --quantity 200 --price 0.12
inventory receive A-100 50
inventory ship A-100 20
inventory list
inventory search bolt
inventory reorder
inventory value
```

`inventory list` prints one line per item: SKU, name, quantity, unit price and the value on hand.
`inventory reorder` lists the items whose quantity is at or below their reorder level.

## Fields

| field | type | meaning |
|---|---|---|
""" + "".join(f"| `{n}` | {k} | {d} |\n" for n, k, d in FIELDS) + """
## The file format

Version 2: `{"version": 2, "items": [...]}`, items sorted by SKU, each as the table above.
Version 1 files (a bare list) must be converted with `inventory-migrate` first.

## Development

```sh
python -m pytest -q
```

Every change to the data model needs a test in `tests/` and a line in `CHANGELOG.md`.
"""

CHANGELOG = """# Changelog

## Unreleased

## 1.3.0

- `inventory reorder` lists the items at or below their reorder level.
- The store is written atomically (temporary file, then rename).

## 1.2.0

- `inventory search` also matches tags, case-insensitively.
- `inventory value` prints the value of the whole stock.

## 1.1.0

- Items have a `location` (aisle and shelf) and a `supplier`.
- File format version 2.

## 1.0.0

- First release: add, receive, ship, list.
"""

PYPROJECT = """[project]
name = "inventory"
version = "1.3.0"
requires-python = ">=3.10"

[project.scripts]
inventory = "inventory.cli:main"

[tool.pytest.ini_options]
pythonpath = ["src"]
"""


def workspace_files():
    return {
        "README.md": README,
        "CHANGELOG.md": CHANGELOG,
        "pyproject.toml": PYPROJECT,
        "src/inventory/__init__.py": '"""Stock keeping for a store room."""\n\n__version__ = "1.3.0"\n',
        "src/inventory/models.py": models_py(),
        "src/inventory/store.py": store_py(),
        "src/inventory/cli.py": cli_py(),
        "tests/test_store.py": test_store_py(),
    }


def write_workspace(root):
    for rel, text in workspace_files().items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


# --------------------------------------------------------------------------------------------
# The scripted conversations.

GOAL = ("Add a discount to inventory items: a `discount_pct` field (0 to 100) on Item, kept in "
        "the JSON file, applied by Item.value(), shown by `inventory list`, tested, and "
        "documented in the README and the CHANGELOG.")

MODELS = "src/inventory/models.py"
STORE = "src/inventory/store.py"
CLI = "src/inventory/cli.py"
NEW_TEST = "tests/test_discount.py"

PATCH_MODELS = {"path": MODELS, "edits": [
    {"old": '    """Free-form labels used by the search command."""\n',
     "new": '    """Free-form labels used by the search command."""\n'
            '    discount_pct: int = 0\n'
            '    """Discount applied to the unit price, in percent (0 to 100)."""\n'},
    {"old": '            raise ValidationError(f"{self.sku}: negative reorder level")\n',
     "new": '            raise ValidationError(f"{self.sku}: negative reorder level")\n'
            '        if not 0 <= self.discount_pct <= 100:\n'
            '            raise ValidationError(f"{self.sku}: discount {self.discount_pct} is not 0-100")\n'},
    {"old": "        return self.unit_price * self.quantity\n",
     "new": "        price = self.unit_price * (100 - self.discount_pct) / 100\n"
            "        return price * self.quantity\n"},
    {"old": '            "tags": list(self.tags),\n',
     "new": '            "tags": list(self.tags),\n            "discount_pct": self.discount_pct,\n'},
    {"old": '            tags=[str(t) for t in data.get("tags", [])],\n',
     "new": '            tags=[str(t) for t in data.get("tags", [])],\n'
            '            discount_pct=int(data.get("discount_pct", 0)),\n'},
]}

PATCH_STORE = {"path": STORE, "edits": [
    {"old": "FORMAT_VERSION = 2\n",
     "new": "FORMAT_VERSION = 2\n# Items written before 1.4 have no discount_pct; Item.from_json reads it as 0.\n"},
]}

PATCH_CLI = {"path": CLI, "edits": [
    {"old": '        f"{item.unit_price:>9.2f} {item.value():>11.2f}"\n',
     "new": '        f"{item.unit_price:>9.2f} {item.discount_pct:>3}% {item.value():>11.2f}"\n'},
]}

PATCH_README = {"path": "README.md", "edits": [
    {"old": "| `tags` | list[str] | Free-form labels used by the search command. |\n",
     "new": "| `tags` | list[str] | Free-form labels used by the search command. |\n"
            "| `discount_pct` | int | Discount on the unit price in percent (0 to 100); "
            "`value` applies it. |\n"},
]}

PATCH_CHANGELOG = {"path": "CHANGELOG.md", "edits": [
    {"old": "## Unreleased\n",
     "new": "## Unreleased\n\n- Items have a `discount_pct` (0 to 100), applied by the value and "
            "shown by `inventory list`. Files without it read as 0.\n"},
]}

TEST_DISCOUNT = '''"""Tests of the item discount."""

from decimal import Decimal

import pytest

from inventory.models import Item, ValidationError


def item(discount_pct):
    return Item("B-200", "Hinge", 4, Decimal("2.50"), "B2-1", 0, "ACME", [], discount_pct)


def test_no_discount_by_default():
    assert Item("B-201", "Hinge", 1, Decimal("1")).discount_pct == 0


def test_value_applies_the_discount():
    assert item(20).value() == Decimal("8.00")


@pytest.mark.parametrize("pct", [-1, 101])
def test_discount_out_of_range_refused(pct):
    with pytest.raises(ValidationError):
        item(pct).validate()


def test_discount_survives_json():
    assert Item.from_json(item(15).to_json()).discount_pct == 15


def test_old_files_read_as_no_discount():
    data = item(0).to_json()
    del data["discount_pct"]
    assert Item.from_json(data).discount_pct == 0
'''


def contains(path, pattern):
    return {"type": "file_contains", "path": path, "pattern": pattern}


LOOP_PLAN = {
    "objective": "Items carry a discount_pct that is stored, applied, listed, tested and documented",
    "steps": [
        {"id": "model", "title": "Add discount_pct to Item, validate it, apply it in value()",
         "assertions": [contains(MODELS, "discount_pct: int = 0"), contains(MODELS, "100 - self.discount_pct")]},
        {"id": "store", "title": "Keep discount_pct in the JSON file (old files read as 0)",
         "assertions": [contains(MODELS, '"discount_pct": self.discount_pct'), contains(STORE, "discount_pct")]},
        {"id": "cli", "title": "Show the discount in `inventory list`",
         "assertions": [contains(CLI, "item.discount_pct")]},
        {"id": "tests", "title": "Test the discount", "assertions": [contains(NEW_TEST, "def test_value_applies_the_discount")]},
        {"id": "docs", "title": "Document it in the README and the CHANGELOG",
         "assertions": [contains("README.md", "discount_pct"), contains("CHANGELOG.md", "discount_pct")]},
    ],
    "postconditions": [
        {"description": "Item.value() applies the discount", "assertions": [contains(MODELS, "100 - self.discount_pct")]},
        {"description": "The README and the CHANGELOG describe discount_pct",
         "assertions": [contains("README.md", "discount_pct"), contains("CHANGELOG.md", "discount_pct")]},
    ],
}


def done(step, evidence):
    return ("step_update", {"id": step, "status": "done", "evidence": evidence})


# 25 calls: 24 tool calls, then the final answer.
LOOP_SCRIPT = [
    ("plan_create", LOOP_PLAN),
    ("file_list", {"path": ".", "recursive": True}),
    ("file_read", {"path": MODELS}),
    ("file_read", {"path": STORE}),
    ("step_update", {"id": "model", "status": "in_progress"}),
    ("file_patch", PATCH_MODELS),
    ("file_read", {"path": MODELS}),
    done("model", "Patched models.py: discount_pct field, validated 0-100, value() applies it; read the file back."),
    ("file_patch", PATCH_STORE),
    ("file_read", {"path": STORE}),
    done("store", "to_json/from_json carry discount_pct (absent reads as 0); store.py notes the default."),
    ("file_read", {"path": CLI}),
    ("file_patch", PATCH_CLI),
    done("cli", "format_row prints the discount between the price and the value."),
    ("file_read", {"path": "tests/test_store.py"}),
    ("file_write", {"path": NEW_TEST, "content": TEST_DISCOUNT}),
    ("file_read", {"path": "README.md"}),
    ("file_patch", PATCH_README),
    ("file_read", {"path": "CHANGELOG.md"}),
    ("file_patch", PATCH_CHANGELOG),
    done("docs", "README field table and CHANGELOG Unreleased entry describe discount_pct."),
    done("tests", "tests/test_discount.py covers the default, value(), range checks and JSON round trip."),
    ("postcondition_verify", {"id": "p1", "evidence": "models.py value() multiplies by (100 - discount_pct) / 100."}),
    ("postcondition_verify", {"id": "p2", "evidence": "README table row and CHANGELOG entry added."}),
]
LOOP_FINAL = ("Items now have a discount_pct (0 to 100): validated, applied by value(), kept in the "
              "JSON file (old files read as 0), shown by `inventory list`, tested in "
              "tests/test_discount.py and documented in the README and the CHANGELOG.")

STEP_ID = "discount"
PLAN = {
    "goal": GOAL,
    "steps": [{
        "id": STEP_ID,
        "title": "Add discount_pct to items, the file format, the listing and the tests",
        "description": GOAL,
        "assertions": [contains(MODELS, "discount_pct"), contains(CLI, "item.discount_pct"),
                       contains(NEW_TEST, "def test_value_applies_the_discount")],
        "acceptance_criteria": ["Item.value() applies the discount and the tests cover it"],
    }],
}

# 10 executor turns: 9 tool calls, then the summary.
EXECUTOR_SCRIPT = [
    ("file_list", {"path": ".", "recursive": True}),
    ("file_read", {"path": MODELS}),
    ("file_read", {"path": STORE}),
    ("file_patch", PATCH_MODELS),
    ("file_patch", PATCH_STORE),
    ("file_read", {"path": CLI}),
    ("file_patch", PATCH_CLI),
    ("file_write", {"path": NEW_TEST, "content": TEST_DISCOUNT}),
    ("file_read", {"path": MODELS}),
]
EXECUTOR_FINAL = ("Added discount_pct to Item (validated 0-100, applied by value(), in to_json and "
                  "from_json with 0 for old files), showed it in `inventory list`, and added "
                  "tests/test_discount.py; read models.py back to check the patch.")

VERDICT = {
    "answers": [{"question": "Does value() apply the discount, with tests?", "yes": True, "confidence": 0.95}],
    "pass": True,
    "confidence": 0.95,
    "feedback": "models.py applies the discount and tests/test_discount.py covers it",
}


def tool_turn(script, final, turn, tag):
    if turn >= len(script):
        return [{"type": "text", "text": final}], "end_turn"
    name, args = script[turn]
    return [{"type": "tool_use", "id": f"toolu_{tag}_{turn:02d}", "name": name, "input": args}], "tool_use"


def answer(body):
    """(role, turn, content, stop_reason) for one request."""
    role = ROLES.get(body.get("model", ""), "other")
    messages = body.get("messages") or []
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    if role == "planner":
        return role, turn, [{"type": "text", "text": json.dumps(PLAN)}], "end_turn"
    if role == "verifier":
        return role, turn, [{"type": "text", "text": json.dumps(VERDICT)}], "end_turn"
    if role == "executor":
        tools = {t.get("name") for t in body.get("tools") or []}
        if "plan_create" in tools:
            return (role, turn) + tool_turn(LOOP_SCRIPT, LOOP_FINAL, turn, "loop")
        return (role, turn) + tool_turn(EXECUTOR_SCRIPT, EXECUTOR_FINAL, turn, "exec")
    return role, turn, None, None


# --------------------------------------------------------------------------------------------


class Server(ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True


def make_handler(cache):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *_):
            pass

        def send_json(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def error(self, status, kind, message):
            self.send_json(status, {"type": "error", "error": {"type": kind, "message": message}})

        def do_GET(self):
            if self.path == "/stats":
                self.send_json(200, cache.snapshot())
            elif self.path == "/calls":
                with cache.lock:
                    self.send_json(200, list(cache.log))
            else:
                self.error(404, "not_found_error", self.path)

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path == "/reset":
                cache.reset()
                self.send_json(200, {"ok": True})
                return
            if self.path != "/v1/messages":
                self.error(404, "not_found_error", self.path)
                return
            body = json.loads(raw or b"{}")
            role, turn, content, stop = answer(body)
            if content is None:
                self.error(400, "invalid_request_error", f"model: {body.get('model')!r} is not scripted")
                return
            usage, refusal = cache.account(body, role, turn)
            if usage is None:
                self.error(400, "invalid_request_error", refusal)
                return
            usage["output_tokens"] = tokens_of(canonical(content))
            self.send_json(200, {
                "id": f"msg_cache_{role}_{turn}", "type": "message", "role": "assistant",
                "model": body.get("model", ""), "content": content, "stop_reason": stop,
                "stop_sequence": None, "usage": usage,
            })

    return Handler


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--mode", choices=("after", "before"), default="after")
    p.add_argument("--lookback", type=int, default=20, help="blocks searched per breakpoint, its own included")
    p.add_argument("--ttl", type=float, default=300.0, help="seconds an entry lives after its last use")
    p.add_argument("--min-tokens", type=int, default=None, help="one minimum cacheable length for every model")
    p.add_argument("--write-workspace", metavar="DIR")
    args = p.parse_args()
    if args.write_workspace:
        write_workspace(args.write_workspace)
        return
    cache = Cache(args)
    server = Server(("127.0.0.1", args.port), make_handler(cache))
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
