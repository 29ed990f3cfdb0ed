"""Stand-ins for what cannot run here: a paid backend that records what it was asked to
submit and starts nothing (Modal itself is faked below its SDK: tests/modal_fake)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from posttrain.runs.layout import runs_root
from posttrain.runs.run_row import RunRow


class PaidBackendDouble:
    """Records submissions; its runs stay queued (no trainer runs behind them). `delay_s`
    makes each submit slow (a Modal spawn with an upload); `fail` makes it raise."""

    name = "modal"

    def __init__(self, root: Path | None = None, delay_s: float = 0.0, fail: bool = False):
        self.root = root or runs_root()
        self.started: list[str] = []
        self.withdrawn: list[str] = []
        self.delay_s = delay_s
        self.fail = fail
        self._lock = threading.Lock()

    def submit(self, plan: Any, run_dir: Path) -> dict[str, Any]:
        time.sleep(self.delay_s)
        if self.fail:
            raise ConnectionError("the double's network is down")
        with self._lock:
            self.started.append(run_dir.name)
        return {"call_id": f"fc-double-{run_dir.name}", "submitted_at": time.time()}

    def withdraw(self, run_dir: Path, handle: dict[str, Any]) -> None:
        with self._lock:
            self.withdrawn.append(run_dir.name)

    def ready(self) -> None:
        """The double is always configured."""

    def reconcile(self, run_dir: Path) -> bool:
        return False

    def leftover(self, run_dir: Path) -> list[str]:
        return []

    def cost_usd(self, row: RunRow) -> float:
        return 0.0

    def unreachable(self, run_dir: Path) -> str | None:
        return None

    def waiting(self, run_dir: Path) -> str | None:
        return None

    def cancel(self, run_dir: Path, grace_s: float = 0) -> dict[str, Any]:
        return {"stopped": True, "how": "double", "forced": False}
