"""Every local file a Modal spec names reaches the run's inputs/ on the Volume, or is refused
naming it: a user's reward with the modules it imports, a judge's gate, an environment file
and the data, in folders with spaces and umlauts as people name them. The uploads are then
laid out as the Volume holds them and loaded in a fresh interpreter from the run directory,
as the container does."""

import json
import shutil
import subprocess
import sys

import pytest

from posttrain.core.errors import ConfigError
from posttrain.runs.inputs import modal_inputs
from posttrain.spec.schema import load_spec
from tests.envfiles import WAREHOUSE

HELPER = "def ende(text):\n    return text.strip().split()[-1] if text.strip() else ''\n"
REWARD = """import re
from hilfen_ü import ende
import wortlisten.reime
from wortlisten import gewichte


def punkte(completions, **columns):
    return [gewichte.VOLL if ende(c) in wortlisten.reime.ENDEN else 0.0 for c in completions]
"""
STOCK = '"""The warehouse\'s stock."""\n\nSTOCK = {"widget": 5, "gadget": 0, "gizmo": 12}\n'
GATE = "from format_regeln import zeilen\n\n\ndef ok(completions, **columns):\n" + (
    "    return [1.0 if zeilen(c) <= 4 else 0.0 for c in completions]\n"
)


@pytest.fixture
def project(tmp_path, monkeypatch, home):
    """A user's folder: data, a reward importing a module and a package beside it, a judge's
    gate, an environment whose stock lives in a module beside it."""
    root = tmp_path / "mein projekt"
    rewards, envs = root / "Belohnungen ü", root / "envs"
    (rewards / "wortlisten").mkdir(parents=True)
    envs.mkdir()
    (root / "daten ü.jsonl").write_text(
        json.dumps({"prompt": "Reime auf Haus", "reference": "Maus", "item": "widget"}) + "\n"
    )
    (rewards / "hilfen_ü.py").write_text(HELPER)
    (rewards / "wortlisten" / "__init__.py").write_text("from . import gewichte  # noqa\n")
    (rewards / "wortlisten" / "gewichte.py").write_text("VOLL = 1.0\n")
    (rewards / "wortlisten" / "reime.py").write_text("ENDEN = {'Maus', 'raus'}\n")
    (rewards / "reim.py").write_text(REWARD)
    (root / "format_regeln.py").write_text("def zeilen(text):\n    return text.count('\\n') + 1\n")
    (root / "gate.py").write_text(GATE)
    (envs / "bestand.py").write_text(STOCK)
    (envs / "lager.py").write_text(
        WAREHOUSE.replace(
            'STOCK = {"widget": 5, "gadget": 0, "gizmo": 12, "sprocket": 40}', ""
        ).replace('"""\n', '"""\n\nfrom bestand import STOCK\n', 1)
    )
    monkeypatch.chdir(root)
    return root


SPEC = {
    "model": "Qwen3-0.6B",
    "dataset": {"path": "daten ü.jsonl"},
    "reward": "Belohnungen ü/reim.py:punkte",
    "environment": {"name": "envs/lager.py:Warehouse", "max_turns": 2},
    "compute": {"backend": "modal"},
}


def test_a_reward_its_modules_an_environment_and_the_data_are_uploaded_and_renamed(project):
    inputs = modal_inputs(load_spec(SPEC))
    uploaded = {u.remote: u.local for u in inputs.uploads}
    assert uploaded == {
        "inputs/daten ü.jsonl": project / "daten ü.jsonl",
        "inputs/reward/reim.py": project / "Belohnungen ü" / "reim.py",
        "inputs/reward/hilfen_ü.py": project / "Belohnungen ü" / "hilfen_ü.py",
        "inputs/reward/wortlisten/__init__.py": project / "Belohnungen ü/wortlisten/__init__.py",
        "inputs/reward/wortlisten/reime.py": project / "Belohnungen ü/wortlisten/reime.py",
        "inputs/reward/wortlisten/gewichte.py": project / "Belohnungen ü/wortlisten/gewichte.py",
        "inputs/environment/lager.py": project / "envs" / "lager.py",
        "inputs/environment/bestand.py": project / "envs" / "bestand.py",
    }
    remote = inputs.spec
    assert remote["dataset"]["path"] == "inputs/daten ü.jsonl"
    assert remote["reward"]["name"] == "inputs/reward/reim.py:punkte"
    assert remote["environment"]["name"] == "inputs/environment/lager.py:Warehouse"
    assert str(project) not in json.dumps(remote, ensure_ascii=False)  # nothing local leaks
    assert "mein projekt" not in json.dumps(remote, ensure_ascii=False)


def test_the_uploaded_reward_and_environment_import_their_modules_where_the_trainer_starts(
    project, tmp_path
):
    """The run directory as the Volume holds it, read by a fresh interpreter started there
    with nothing of this machine on its path (-I): the spec validates, the reward imports its
    helper and package, the environment its stock, and both score as they do here."""
    inputs = modal_inputs(load_spec(SPEC))
    run_dir = tmp_path / "volume" / "run-1"
    for upload in inputs.uploads:
        (run_dir / upload.remote).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(upload.local, run_dir / upload.remote)
    (run_dir / "spec.json").write_text(json.dumps(inputs.spec), encoding="utf-8")
    shutil.rmtree(project)  # the container has no user folder to fall back on
    script = """
import json
from posttrain.environments.loader import load
from posttrain.rewards.registry import get_reward
from posttrain.spec.schema import load_spec

spec = load_spec("spec.json")
reward = get_reward(spec.reward.name, spec.reward.params)
env, tools = load(spec.environment.name, spec.environment.tools).new()
env.reset(item="widget", quantity=2)
print(json.dumps({
    "reward": reward(["Ein Haus\\nund eine Maus", "Ein Haus"]),
    "stock": tools["check_stock"]("widget"),
    "reserve": tools["reserve"]("widget", 2),
    "paid": env.get_reward(),
}))
"""
    done = subprocess.run(
        [sys.executable, "-I", "-c", script],
        cwd=run_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "reward": [1.0, 0.0],
        "stock": "5 in stock",
        "reserve": "reserved 2 widget",
        "paid": 1.0,
    }


def test_a_judges_gate_and_plain_tool_functions_are_uploaded_with_their_modules(project):
    spec = {
        **SPEC,
        "reward": {
            "name": "judge",
            "params": {
                "rubric": "Reimt es?",
                "base_url": "https://judge.example/v1",
                "model": "judge",
                "price_per_mtok": [0.0, 0.0],
                "gate": {"name": "gate.py:ok"},
            },
        },
        "environment": {"tools": "envs/lager.py:[ohne, mit]"},
    }
    (project / "envs" / "lager.py").write_text(
        "from bestand import STOCK\n\n\ndef ohne() -> str:\n    return ''\n\n\n"
        "def mit() -> str:\n    return ''\n"
    )
    inputs = modal_inputs(load_spec(spec))
    uploaded = {u.remote for u in inputs.uploads}
    assert {"inputs/reward-gate/gate.py", "inputs/reward-gate/format_regeln.py"} <= uploaded
    assert {"inputs/environment/lager.py", "inputs/environment/bestand.py"} <= uploaded
    assert inputs.spec["reward"]["params"]["gate"]["name"] == "inputs/reward-gate/gate.py:ok"
    assert inputs.spec["environment"]["tools"] == "inputs/environment/lager.py:[ohne, mit]"


def test_a_file_gone_since_the_spec_was_checked_is_refused_naming_its_field(project):
    spec = load_spec(SPEC)
    (project / "daten ü.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"^dataset.path 'daten ü.jsonl' is not a file"):
        modal_inputs(spec)
    spec = load_spec({**SPEC, "dataset": {"builtin": "rhyme-gym"}})
    (project / "envs" / "lager.py").unlink()
    with pytest.raises(ConfigError, match=r"^environment.name 'envs/lager.py' is not a file"):
        modal_inputs(spec)


def test_a_reward_named_as_a_module_of_the_working_directory_is_refused_with_its_file(
    project, monkeypatch
):
    (project / "eigene_belohnung_x7.py").write_text(
        "def punkte(completions, **c):\n    return []\n"
    )
    monkeypatch.syspath_prepend(str(project))  # the trainer's `python -m` has it on sys.path
    spec = load_spec({**SPEC, "reward": "eigene_belohnung_x7:punkte"})
    with pytest.raises(ConfigError) as refused:
        modal_inputs(spec)
    assert str(refused.value).startswith(
        "reward.name 'eigene_belohnung_x7:punkte': module 'eigene_belohnung_x7' is "
        "eigene_belohnung_x7.py in the working directory"
    )
    assert "name it by its file ('eigene_belohnung_x7.py:punkte')" in str(refused.value)


def test_built_in_rewards_and_environments_upload_nothing(project):
    spec = {**SPEC, "dataset": {"builtin": "rhyme-gym"}, "reward": "rhyme_relevance"}
    inputs = modal_inputs(load_spec({**spec, "environment": "calculator"}))
    assert inputs.uploads == ()
    assert inputs.spec["environment"]["name"] == "calculator"
    assert inputs.spec["reward"]["name"] == "rhyme_relevance"


def test_a_local_embedder_folder_for_the_relevance_reward_is_refused(project):
    (project / "mini").mkdir()
    reward = {"name": "relevance", "params": {"model": "mini"}}
    spec = load_spec({**SPEC, "reward": reward, "environment": None})
    with pytest.raises(ConfigError, match=r"^reward.params.model 'mini' is a folder"):
        modal_inputs(spec)


def test_a_dataset_folder_given_as_a_hub_repo_is_refused(project):
    (project / "meine_daten").mkdir()
    spec = load_spec({**SPEC, "dataset": {"hf_repo": "meine_daten"}})
    with pytest.raises(ConfigError, match=r"^dataset.hf_repo 'meine_daten' is a folder"):
        modal_inputs(spec)


def test_a_reward_file_imports_a_module_beside_it_on_this_machine_too(project):
    """The same rule here as on Modal: a local run of the reward in a subfolder finds its
    helper (the trainer's working directory is the project, not the reward's folder)."""
    script = (
        "from posttrain.rewards.registry import get_reward\n"
        "print(get_reward('Belohnungen ü/reim.py:punkte')(['eine Maus', 'ein Haus']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[1.0, 0.0]"


def test_imports_are_read_never_run_and_follow_packages_and_relative_imports(tmp_path, monkeypatch):
    from posttrain.core.user_code import local_modules

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("raise SystemExit('never run')\n")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("from ..nah import x\n")
    (tmp_path / "pkg" / "nah.py").write_text("import json, os\nfrom .. import zu_weit\n")
    (tmp_path / "json.py").write_text("")  # the standard library's name: never taken from here
    (tmp_path / "kaputt.py").write_text("def (:\n")
    main = tmp_path / "haupt.py"
    main.write_text("import pkg.sub\nimport kaputt\nimport numpy\nimport json\nfrom . import y\n")
    assert sorted(local_modules(main)) == [
        "kaputt.py",
        "pkg/__init__.py",
        "pkg/nah.py",
        "pkg/sub/__init__.py",
    ]
