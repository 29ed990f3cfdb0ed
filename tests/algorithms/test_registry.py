"""The algorithms' registry is the one place a kind is decided: every kind has a trainer, a
price and a spec section that work; every list of algorithms people read (the CLI's help, the
server's instructions, the package's description, the MCP registry's entry, the README, the
skill) names each one; and outside posttrain/algorithms the kind names are written in no more
than the few places that must (the demo's own specs, the calibration's measured steps)."""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from posttrain.algorithms.kinds import ALGORITHMS, algorithm_of, titles
from posttrain.core.errors import ConfigError
from posttrain.gpu.phases import trainer_of
from posttrain.spec.schema import load_spec

ROOT = Path(__file__).resolve().parents[2]
KIND_STRING = re.compile("[\"'](" + "|".join(ALGORITHMS) + ")[\"']")


def test_outside_the_algorithms_package_kind_names_appear_in_at_most_four_files():
    files = [
        p
        for p in (ROOT / "posttrain").rglob("*.py")
        if "algorithms" not in p.relative_to(ROOT / "posttrain").parts
        and KIND_STRING.search(p.read_text())
    ]
    named = sorted(str(p.relative_to(ROOT)) for p in files)
    assert len(named) <= 4, named


def test_every_algorithm_has_a_trainer_a_local_price_and_a_section_it_owns():
    for algorithm in ALGORITHMS.values():
        assert callable(trainer_of(algorithm.name)), algorithm.name
        assert set(algorithm.local_step_s) == {"tiny", "stand_in"}
        if algorithm.section is not None:
            name, model = algorithm.section
            spec = load_spec(_spec(algorithm.name))
            assert getattr(spec.algorithm, name) == model()  # filled with its defaults
            other = next(a for a in ALGORITHMS.values() if a.section is None and not a.own_fields)
            with pytest.raises(ConfigError, match=f"algorithm.{name} works with kind"):
                load_spec(_spec(other.name, **{name: {}}))


def test_each_kind_prices_a_qwen_run_on_modal_with_its_own_terms():
    from posttrain.tools.plan import plan

    costs = {}
    for kind in ALGORITHMS:
        spec = _spec(kind, compute={"backend": "modal", "gpu": "H100"})
        costs[kind] = plan(spec).cost
        assert costs[kind].step_s > 0, kind
        if not algorithm_of(kind).step.measured:
            assert algorithm_of(kind).step.priced_note in costs[kind].basis
    # the same batch and lengths: a pair's two answers and a reference cost more than one
    assert costs["dpo"].step_s > costs["sft"].step_s
    assert costs["sft"].step_s < costs["kto"].step_s


def _spec(kind: str, **more) -> dict:
    algorithm = {"kind": kind, **more.pop("algorithm", {})}
    if kind == "distill":
        algorithm["teacher"] = "Qwen3-1.7B"
    algorithm |= {k: v for k, v in more.items() if k in ("dpo", "kto", "teacher")}
    more = {k: v for k, v in more.items() if k not in ("dpo", "kto", "teacher")}
    return {"model": "Qwen3-0.6B", "dataset": {"builtin": "rhyme-gym"}, "algorithm": algorithm,
            **more}  # fmt: skip


def _names_every_algorithm(text: str, where: str) -> None:
    lowered = text.lower()
    missing = [a.title for a in ALGORITHMS.values() if a.title.lower() not in lowered]
    assert not missing, f"{where} does not name {missing}"


def test_every_list_of_algorithms_people_read_names_each_one():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    _names_every_algorithm(project["description"], "pyproject's description")
    server = json.loads((ROOT / "server.json").read_text())
    _names_every_algorithm(server["description"], "server.json's description")
    assert len(server["description"]) <= 100  # the MCP registry's schema refuses longer
    _names_every_algorithm((ROOT / "README.md").read_text()[:1200], "the README's opening")
    skill = (ROOT / "skills" / "agent-driven-training" / "SKILL.md").read_text()
    _names_every_algorithm(skill.split("\n---", 1)[0], "the skill's description")
    from posttrain.server.app import INSTRUCTIONS

    _names_every_algorithm(INSTRUCTIONS, "the server's instructions")
    index = (ROOT / "docs" / "index.md").read_text().split("## The algorithms", 1)[1]
    section = index.split("\n## ", 1)[0]
    missing = [kind for kind in ALGORITHMS if f"(`{kind}`)" not in section]
    assert not missing, f"docs/index.md's algorithms do not list the kinds {missing}"
    shown = subprocess.run(
        [sys.executable, "-m", "posttrain.cli", "--help"], capture_output=True, text=True
    )
    _names_every_algorithm(" ".join(shown.stdout.split()), "posttrain --help")
    assert titles() in " ".join(shown.stdout.split())
