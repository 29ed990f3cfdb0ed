"""Environment files as a user writes them, and broken variants of them (test data)."""

import json
from pathlib import Path

WAREHOUSE = '''
"""Reserve stock for a customer's order in a small warehouse."""

STOCK = {"widget": 5, "gadget": 0, "gizmo": 12, "sprocket": 40}


class Warehouse:
    def __init__(self):
        self.stock = dict(STOCK)
        self.reserved = {}
        self.order = None

    def reset(self, item=None, quantity=None, **row):
        self.stock, self.reserved = dict(STOCK), {}
        self.order = (item, quantity)
        return f"\\n(Order on file: {quantity} x {item}.)"

    def check_stock(self, item: str) -> str:
        """Look up how many units of an item are in stock.

        Args:
            item: The item's name, such as "widget".
        """
        if item not in self.stock:
            return f"unknown item {item!r}; items: {', '.join(sorted(self.stock))}"
        return f"{self.stock[item]} in stock"

    def reserve(self, item: str, quantity: int) -> str:
        """Reserve units of an item for the order.

        Args:
            item: The item's name.
            quantity: How many units to reserve.
        """
        have = self.stock.get(item, 0)
        if quantity > have:
            return f"only {have} {item} in stock"
        self.stock[item] = have - quantity
        self.reserved[item] = self.reserved.get(item, 0) + quantity
        return f"reserved {quantity} {item}"

    def get_reward(self) -> float:
        item, quantity = self.order
        return 1.0 if self.reserved == {item: quantity} else 0.0
'''

# the same, with two bugs: a lookup that raises on an unknown item, and a reward that pays
# an order nobody reserved
BROKEN = WAREHOUSE.replace(
    '''        if item not in self.stock:
            return f"unknown item {item!r}; items: {', '.join(sorted(self.stock))}"
        return f"{self.stock[item]} in stock"''',
    '''        return f"{self.stock[item]} in stock"''',
).replace(
    "        return 1.0 if self.reserved == {item: quantity} else 0.0",
    "        return 1.0 if not self.reserved or self.reserved == {item: quantity} else 0.0",
)

HOSTILE = '''
import os
import sys
import time


class Hostile:
    def reset(self, **row):
        return None

    def a_wait(self) -> str:
        """Wait for the supplier (it never answers)."""
        time.sleep(1000)
        return "done"

    def b_shout(self) -> str:
        """Print a very long log."""
        sys.stdout.write("x" * 100_000_000)
        sys.stdout.flush()
        return "logged"

    def c_quit(self) -> str:
        """Leave."""
        os._exit(3)

    def get_reward(self) -> float:
        return 0.0
'''

ORDERS = [
    {"prompt": "Please reserve 3 widgets for Ana.", "item": "widget", "quantity": 3},
    {"prompt": "Reserve 10 gizmos for the Lyon shop.", "item": "gizmo", "quantity": 10},
    {"prompt": "Put 25 sprockets aside for Kraków.", "item": "sprocket", "quantity": 25},
]


def write_project(folder: Path, source: str = WAREHOUSE, **environment) -> Path:
    """envs/warehouse.py, orders.jsonl (with demonstrations) and spec.yaml, as a user writes
    them; the spec's path."""
    (folder / "envs").mkdir(exist_ok=True)
    (folder / "envs" / "warehouse.py").write_text(source)
    with (folder / "orders.jsonl").open("w") as f:
        for row in ORDERS:
            demo = [
                {"name": "check_stock", "arguments": {"item": row["item"]}},
                {
                    "type": "function",
                    "function": {
                        "name": "reserve",
                        "arguments": json.dumps({"item": row["item"], "quantity": row["quantity"]}),
                    },
                },
            ]
            f.write(json.dumps({**row, "demo": demo}) + "\n")
    env = {"name": "envs/warehouse.py:Warehouse", "demo_column": "demo", **environment}
    lines = [
        "model: Qwen3-0.6B",
        "dataset: {path: orders.jsonl}",  # the minimal spec: no reference column
        f"environment: {json.dumps(env)}",
        "algorithm: {kind: grpo, steps: 10, batch_size: 8, num_generations: 4}",
    ]
    (folder / "spec.yaml").write_text("\n".join(lines) + "\n")
    return folder / "spec.yaml"
