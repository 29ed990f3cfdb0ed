"""export_run: the trained model in hand, as a folder plain `transformers` loads.

Merged (the default): the LoRA adapter merged into the model it was trained on, or a full
fine-tune's weights, as safetensors with the tokenizer and chat template
(posttrain.gpu.export_weights, in a child process: the weights never load into the server). Not
merged: the adapter folder as training saved it. A Modal run's folders are read from the
Volume first (its final/, and the warm-start or earlier run it was trained on); merging then
runs on this machine, so a hub base model must be in the Hugging Face cache or reachable.

The folder is written beside `out` and renamed into place when complete: a failed export
leaves nothing half-written. `push_to_hub` uploads it to a private repository where a token
and the hub are reachable; the token is never printed.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from posttrain.core.errors import BackendError, ConfigError
from posttrain.core.paths import confine
from posttrain.core.secrets import redact
from posttrain.gpu.export_weights import EXPORT_INFO
from posttrain.jobs.detached import find_job, start_job
from posttrain.runs import forkserver
from posttrain.runs.context import Context
from posttrain.runs.layout import RUN_META, SPEC, read_json
from posttrain.runs.run_row import RunRow
from posttrain.spec.schema import load_spec

EXPORT_TIMEOUT_S = 3600  # a 4B model merges in minutes on a CPU; past an hour something hangs
HUB_REPO = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}\Z")


class ExportResult(BaseModel):
    run_id: str
    out: str
    merged: bool  # a LoRA adapter merged into its base (False: a full fine-tune, or not asked)
    adapter_only: bool  # the adapter folder as saved, not a loadable model on its own
    base: str | None  # what the adapter was merged into
    files: list[str]
    pushed_to: str | None = None
    loads_with: str


def export_run(
    run_id: str,
    out: str | Path,
    merged: bool = True,
    push_to_hub: str | None = None,
    ctx: Context | None = None,
    roots: list[Path] | None = None,
) -> ExportResult:
    """Write run_id's trained model into the new folder `out` (confined to `roots`)."""
    ctx = ctx or Context()
    row, spec, target = _checked(run_id, out, push_to_hub, ctx, roots)
    run_dir = row.path
    backend = ctx.backend(row.backend_name)
    _fetch(backend, run_dir, spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        info = _merge(run_dir, staging) if merged else _adapter(backend, run_dir, staging)
        if target.exists():
            target.rmdir()
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result = ExportResult(
        run_id=run_id,
        out=str(target),
        merged=info["merged_adapter"],
        adapter_only=not merged and _is_adapter(target),
        base=info.get("base"),
        files=sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()),
        loads_with=(
            f"peft.AutoPeftModelForCausalLM.from_pretrained('{target}')"
            if not merged and _is_adapter(target)
            else f"transformers.AutoModelForCausalLM.from_pretrained('{target}')"
        ),
    )
    if push_to_hub:
        result.pushed_to = push(target, push_to_hub)
    return result


def _checked(
    run_id: str, out: str | Path, push_to_hub: str | None, ctx: Context, roots: list[Path] | None
) -> tuple[RunRow, Any, Path]:
    """What an export can be refused for, checked in a moment: the run, the hub name and the
    folder (confined to `roots`, new or empty)."""
    row = ctx.run(run_id)
    spec = load_spec(row.path / SPEC)
    if spec.model.stand_in:
        raise ConfigError(
            f"run {run_id} is a dry run: its model is a random-weight stand-in, nothing worth "
            f"exporting; export a run launched on the real model"
        )
    if push_to_hub is not None and not HUB_REPO.match(push_to_hub):
        raise ConfigError(
            f"push_to_hub '{push_to_hub}': give a hub repository as owner/name, e.g. "
            f"my-org/qwen3-rhymes"
        )
    target = confine(out, "out", roots)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigError(f"out '{out}' exists and is not empty: name a new folder")
    return row, spec, target


class ExportOutcome(BaseModel):
    status: Literal["started", "done"] = Field(
        description="started: running as a job (poll get_job with job_id); done: result set."
    )
    run_id: str
    job_id: str
    result: ExportResult | None = None
    message: str


def start_export(
    run_id: str,
    out: str | Path,
    merged: bool = True,
    push_to_hub: str | None = None,
    ctx: Context | None = None,
    roots: list[Path] | None = None,
) -> ExportOutcome:
    """Check the export and start it as a detached job; returns at once with its id. The
    same request again is the same job (running, or done with its result)."""
    ctx = ctx or Context()
    args = {"run_id": run_id, "out": str(out), "merged": merged, "push_to_hub": push_to_hub}
    job = find_job("export", args)
    if job is None:
        _, _, target = _checked(run_id, out, push_to_hub, ctx, roots)
        extra = {"roots": [str(r) for r in roots] if roots is not None else None}
        job = start_job("export", {**args, "out": str(target)}, ctx.root, extra)
    if job.status == "succeeded" and job.result:
        result = ExportResult(**job.result)
        return ExportOutcome(
            status="done",
            run_id=run_id,
            job_id=job.job_id,
            result=result,
            message=f"exported {run_id} to {result.out}",
        )
    if job.status != "running":
        raise BackendError(f"export job {job.job_id} {job.status}: {job.error or 'no result'}")
    return ExportOutcome(
        status="started",
        run_id=run_id,
        job_id=job.job_id,
        message=f"exporting {run_id} in job {job.job_id}; poll get_job with this job_id",
    )


def _is_adapter(folder: Path) -> bool:
    return (folder / "adapter_config.json").is_file()


def _fetch(backend: Any, run_dir: Path, spec: Any) -> None:
    """Bring the folders the export reads onto this machine (a Modal run's live on the
    Volume): final/, the run's warm-start, and the earlier run it was trained from."""
    wanted = [(run_dir, "final")]
    if spec.algorithm.warmstart:  # only a kind that takes one has one (the spec says)
        wanted.append((run_dir, "warmstart"))
    base = read_json(run_dir / RUN_META).get("base") or {}
    if base.get("run_id"):
        wanted.append((run_dir.parent / base["run_id"], base.get("folder") or "final"))
    for folder_run, folder in wanted:
        if (folder_run / folder).is_dir():
            continue
        folder_run.mkdir(parents=True, exist_ok=True)
        part = Path(tempfile.mkdtemp(prefix=f".{folder}.partial-", dir=folder_run))
        try:
            backend.pull(folder_run, part, folder)
            part.rename(folder_run / folder)
        finally:
            shutil.rmtree(part, ignore_errors=True)


def _merge(run_dir: Path, staging: Path) -> dict[str, Any]:
    """posttrain.gpu.export_weights in a child process; its JSON line, or a clear error."""
    try:
        code, output = _run_export([str(run_dir), str(staging)], staging)
    except subprocess.TimeoutExpired:
        raise BackendError(f"the export did not finish within {EXPORT_TIMEOUT_S} s") from None
    if code == 0:
        for line in reversed(output.strip().splitlines()):  # its last line, warnings aside
            with contextlib.suppress(ValueError):
                if isinstance(info := json.loads(line), dict):
                    return info
    tail = redact(output).strip().splitlines()[-6:]
    raise BackendError(
        f"merging run {run_dir.name} failed: {' / '.join(tail) or 'no message'}"
        + _offline_hint(output)
    )


def _run_export(args: list[str], staging: Path) -> tuple[int, str]:
    """The export's exit code and output. Forked by the fork server when one runs (it holds
    torch and transformers: ~6 CPU-s less a merge), else a new interpreter."""
    log = staging.with_name(staging.name + ".log")  # beside the folder, never inside it
    try:
        code = forkserver.run_forked("posttrain.gpu.export_weights", args, log, EXPORT_TIMEOUT_S)
        if code is not None:
            return code, log.read_text(errors="replace") if log.exists() else ""
    finally:
        log.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "posttrain.gpu.export_weights", *args],
        capture_output=True,
        text=True,
        timeout=EXPORT_TIMEOUT_S,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def _offline_hint(stderr: str) -> str:
    if "offline" in stderr.lower() or "couldn't connect" in stderr.lower():
        return (
            ". The base model is neither in the Hugging Face cache nor reachable: download it "
            "where the hub is reachable (`hf download MODEL`), or export with merged=false "
            "for the adapter alone"
        )
    return ""


def _adapter(backend: Any, run_dir: Path, staging: Path) -> dict[str, Any]:
    backend.pull(run_dir, staging)
    info = {"run_id": run_dir.name, "merged_adapter": False, "base": None}
    if _is_adapter(staging):
        info["base"] = read_json(staging / "adapter_config.json").get("base_model_name_or_path")
    (staging / EXPORT_INFO).write_text(json.dumps(info, indent=2) + "\n")
    return info


def push(folder: Path, repo: str) -> str:
    """Upload `folder` to a private hub repository; its URL."""
    from huggingface_hub import HfApi, get_token

    from posttrain.gpu.tokenizers import hub_reachable

    token = get_token()
    if not token:
        raise ConfigError(
            "push_to_hub: no Hugging Face token here: set HF_TOKEN to a write token (or run "
            "`hf auth login`), then export again"
        )
    if not hub_reachable():
        raise BackendError(
            f"push_to_hub {repo}: the hub cannot be reached from this machine; the model is in "
            f"{folder}, upload it from where the hub is reachable"
        )
    api = HfApi(token=token)
    try:
        api.create_repo(repo, private=True, exist_ok=True)
        api.upload_folder(repo_id=repo, folder_path=str(folder))
    except Exception as exc:  # the hub's own message, with any token taken out
        raise BackendError(
            f"push_to_hub {repo} failed: {redact(str(exc), [token])[:300]}"
        ) from None
    return f"https://huggingface.co/{repo}"


def job_work(job: dict[str, Any], progress: Callable[..., None]) -> dict[str, Any]:
    """The detached job's work (posttrain.jobs.worker), from its job.json."""

    args, extra = job["args"], job.get("extra") or {}
    ctx = Context(root=Path(job["runs_root"]))
    progress(0, 1, "exporting")
    roots = [Path(r) for r in extra["roots"]] if extra.get("roots") is not None else None
    result = export_run(
        args["run_id"], args["out"], args["merged"], args["push_to_hub"], ctx=ctx, roots=roots
    )
    return result.model_dump(mode="json")
