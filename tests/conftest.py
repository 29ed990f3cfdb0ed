"""Shared fixtures. Tests use real parts: the real CMU dictionary, the real MiniLM, real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach the hub, and fail fast if asked
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "rhyme_qa.jsonl"


@pytest.fixture(scope="session")
def qa_rows() -> list[dict]:
    """The bundled question/reference/verse rows."""
    return [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
