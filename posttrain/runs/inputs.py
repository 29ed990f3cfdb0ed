"""What a Modal run reads from this machine: every local file its spec names is uploaded to
the run's inputs/ on the Volume, or refused, naming the field, the path and the fix.

The container starts the trainer in the run directory, so the remote spec names each upload
relative to it:

    inputs/<file>                          dataset.path
    inputs/reward/<file>.py + its modules  reward.name 'path/to/file.py:fn'
    inputs/reward-gate/<file>.py + ...     a judge's reward.params.gate.name
    inputs/environment/<file>.py + ...     environment.name 'file.py:Class', environment.tools

Not uploaded: eval.path and eval.metrics, which evaluate reads and scores on this machine (the
held-out prompts travel in its job); the container's spec names neither.

A code file gets a folder of its own, with the modules it imports from its own folder and the
working directory beside it at their import paths (posttrain.core.user_code): its loader puts
that folder first on sys.path, so `from helpers import x` imports there as it does here.

Refused for Modal, because the container cannot read this machine and weights would be
gigabytes uploaded for every run: a model folder or .gguf file as model.name or
algorithm.teacher, a folder as dataset.hf_repo, an embedder folder as a relevance reward's
params.model, and a reward or environment named as a module (`module:fn`) that lives in the
working directory (named by its file instead, it is uploaded). What cannot be seen: a path
inside a user reward's own params, or a data file that its code opens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.core.errors import ConfigError
from posttrain.core.paths import exists, expand
from posttrain.core.user_code import local_modules, working_directory_module
from posttrain.environments.refs import (
    BUILTINS,
    is_file_target,
    split_class_ref,
    split_tools_ref,
)
from posttrain.models.catalog import PRESETS, get_preset
from posttrain.rewards.registry import REWARDS
from posttrain.rewards.user import is_file_ref, split_ref
from posttrain.spec.schema import RunSpec

INPUTS = "inputs"  # under the run directory, where the container starts the trainer
EMBEDDER_REWARDS = ("relevance", "rhyme_relevance")  # params.model: a sentence-transformers model
UNREADABLE = "which the Modal function cannot read"


@dataclass(frozen=True)
class Upload:
    local: Path
    remote: str  # posix, relative to the run directory: inputs/reward/helpers.py
    field: str  # the spec field that brought it


@dataclass(frozen=True)
class ModalInputs:
    spec: dict[str, Any]  # the spec as the container reads it: every local path rewritten
    uploads: tuple[Upload, ...]


def modal_inputs(spec: RunSpec) -> ModalInputs:
    """The uploads a Modal run of this spec needs and the spec naming them; ConfigError for a
    local file it cannot take (the field, the path and the fix) or one that is gone."""
    refuse_local_models(spec)
    data = json.loads(spec.to_json())
    uploads: list[Upload] = []
    if spec.dataset.path:
        local = _file(spec.dataset.path, "dataset.path")
        data["dataset"]["path"] = _add(uploads, local, f"{INPUTS}/{local.name}", "dataset.path")
    if spec.reward is not None:
        _reward(data["reward"], "reward", "reward", uploads)
        gate = data["reward"]["params"].get("gate") if spec.reward.name == "judge" else None
        if isinstance(gate, dict) and isinstance(gate.get("name"), str):
            gate.setdefault("params", {})
            _reward(gate, "reward.params.gate", "reward-gate", uploads)
    if spec.environment is not None:
        _environment(data["environment"], uploads)
    if spec.eval is not None:
        # evaluate reads eval.path and scores eval.metrics on this machine (the held-out
        # prompts travel in its job): the container's spec names neither, so nothing of them
        # is uploaded and nothing there looks for them
        data["eval"] = {**data["eval"], "path": None, "metrics": []}
    return ModalInputs(data, tuple(uploads))


def refuse_local_models(spec: RunSpec) -> None:
    """Model weights and dataset folders on this machine are not uploaded: named by the hub
    id or a preset, the container downloads them (into its Hugging Face cache Volume)."""
    hub = ", ".join(p.name for p in PRESETS.values() if p.hf_repo)
    named = (("model.name", spec.model.name), ("algorithm.teacher", spec.algorithm.teacher))
    for field, name in named:
        if not name or get_preset(name) is not None or not exists(name):
            continue
        what = "a GGUF file" if name.lower().endswith(".gguf") else "a folder"
        raise ConfigError(
            f"{field} '{name}' is {what} on this machine, {UNREADABLE} (weights are not "
            f"uploaded: gigabytes for every run). Push the model to the Hugging Face hub and "
            f"name it by its hub id (a private repo: set POSTTRAIN_HF_SECRET to a Modal secret "
            f"holding HF_TOKEN at `posttrain modal deploy`), or name a preset: {hub}. A local "
            f"dry run (`smoke_run`) reads it here"
        )
    repo = spec.dataset.hf_repo
    if repo and exists(repo):
        raise ConfigError(
            f"dataset.hf_repo '{repo}' is a folder on this machine, {UNREADABLE}; give its data "
            f"file as dataset.path (uploaded with the run), or push the dataset to the Hugging "
            f"Face hub and name its repo id"
        )


def _reward(section: dict[str, Any], field: str, folder: str, uploads: list[Upload]) -> None:
    """A reward ({name, params}) as the container reads it: a file uploaded with its modules,
    a built-in's local embedder refused, a module in the working directory refused."""
    name, params = section["name"], section.get("params") or {}
    if name in REWARDS:
        model = params.get("model")
        if name in EMBEDDER_REWARDS and isinstance(model, str) and exists(model):
            raise ConfigError(
                f"{field}.params.model '{model}' is a folder on this machine, {UNREADABLE} (the "
                f"reward would fall back to token F1 there); name a sentence-transformers model "
                f"by its hub id, or leave it out for all-MiniLM-L6-v2"
            )
        return
    target, function = split_ref(name)
    if is_file_ref(target):
        remote = _code(_file(target, f"{field}.name"), folder, f"{field}.name", uploads)
        section["name"] = f"{remote}:{function}"
    else:
        _refuse_local_module(target, f"{field}.name", name, function)


def _environment(section: dict[str, Any], uploads: list[Upload]) -> None:
    """environment.name 'file.py:Class' or environment.tools 'file.py:[fn, ...]': the file
    uploaded with its modules, the rest of the reference kept as written."""
    field = "environment.name" if section.get("name") is not None else "environment.tools"
    ref = section[field.split(".")[1]]
    if field == "environment.name":
        if ref in BUILTINS:
            return
        target, _ = split_class_ref(ref)
        rest = ref.rpartition(":")[2]
    else:
        target, _ = split_tools_ref(ref)
        rest = ref.partition(":")[2]
    if not is_file_target(target):
        _refuse_local_module(target, field, ref, rest)
        return
    remote = _code(_file(target, field), "environment", field, uploads)
    section[field.split(".")[1]] = f"{remote}:{rest}"


def _code(local: Path, folder: str, field: str, uploads: list[Upload]) -> str:
    """A user's Python file and the modules it imports, into inputs/<folder>/."""
    remote = _add(uploads, local, f"{INPUTS}/{folder}/{local.name}", field)
    for rel, module in local_modules(local).items():
        _add(uploads, module, f"{INPUTS}/{folder}/{rel}", f"{field} (imported)")
    return remote


def _refuse_local_module(module: str, field: str, ref: str, rest: str) -> None:
    file = working_directory_module(module)
    if file is None:
        return  # installed here (the image must carry it) or posttrain's own
    shown = file.relative_to(Path.cwd().resolve()).as_posix()
    raise ConfigError(
        f"{field} '{ref}': module '{module}' is {shown} in the working directory, "
        f"{UNREADABLE} as a module; name it by its file ('{shown}:{rest}'), and it is "
        f"uploaded with the modules it imports"
    )


def _file(path: str, field: str) -> Path:
    local = expand(path).absolute()
    if not local.is_file():
        raise ConfigError(
            f"{field} '{path}' is not a file on this machine (looked for {local}); a Modal run "
            f"uploads the files its spec names: give an existing file, relative to the working "
            f"directory or absolute"
        )
    return local


def _add(uploads: list[Upload], local: Path, remote: str, field: str) -> str:
    """Record one upload; the same remote path for two different files is refused."""
    for known in uploads:
        if known.remote == remote:
            if known.local.resolve() == local.resolve():
                return remote
            raise ConfigError(
                f"{field} '{local}' and {known.field} '{known.local}' would both be uploaded as "
                f"{remote}; rename one of them"
            )
    uploads.append(Upload(local, remote, field))
    return remote
