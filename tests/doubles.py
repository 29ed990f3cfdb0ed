"""Stand-ins for what cannot run here. Until the Modal issue, a paid backend is a double that
records what it was asked to start and writes the run directory a real backend would."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from posttrain.runs.layout import RUN_META, SPEC, new_run_id, runs_root, write_json_atomic


class PaidBackendDouble:
    """Records starts; its runs stay queued (no trainer runs behind them)."""

    name = "modal"

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or runs_root()
        self.started: list[str] = []

    def start(self, spec: Any, run_id: str | None = None, **meta: Any) -> str:
        run_id = run_id or new_run_id()
        run_dir = self.root / run_id
        run_dir.mkdir(parents=True)
        (run_dir / SPEC).write_text(spec.to_json())
        write_json_atomic(
            run_dir / RUN_META,
            {
                "run_id": run_id,
                "spec_id": spec.spec_id,
                "backend": self.name,
                "created_at": time.time(),
                **meta,
            },
        )
        self.started.append(run_id)
        return run_id

    def ready(self) -> None:
        """The double is always configured."""

    def reconcile(self, run_dir: Path) -> bool:
        return False

    def cost_usd(self, row: dict[str, Any]) -> float:
        return 0.0

    def unreachable(self, run_dir: Path) -> str | None:
        return None

    def cancel(self, run_dir: Path, grace_s: float = 0) -> dict[str, Any]:
        return {"stopped": True, "how": "double", "forced": False}
