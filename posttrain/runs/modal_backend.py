"""The Modal backend: runs spawned on Modal GPUs, followed through the Volume and the call.

submit() checks that the deployed app carries this posttrain (its tags), uploads every local
file the spec names to the runs Volume (posttrain.runs.inputs), and spawns the deployed
`train_run` function with the spec's GPU, the CPU cores and memory the plan priced, and a
timeout past the run's own deadline; the FunctionCall id is then recorded in run.json
(posttrain.runs.backend). The trainer writes the run directory on the Volume and commits it
every 30 s; sync() mirrors its events and traces into the local run directory, where the index
reads them like any local run. Before the first commit there is nothing to mirror: the run
reads "starting on Modal". Status comes from the FunctionCall (finished, failed, timed out,
cancelled) plus that directory; after a restart, runs are reconciled from the stored call ids.
Cost so far = seconds since the spawn x the container's price a second (GPUs, CPU, memory: an
upper bound, since Modal bills from the container's start).

All Modal access goes through `self.sdk` (the `modal` module by default). The tests point the
real SDK at a fake Modal control plane (tests/modal_fake), so what it raises and returns here
is the SDK's own answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from posttrain.core.build import TAG_HF_SECRET, TAG_SOURCE, fingerprint
from posttrain.core.errors import BackendError
from posttrain.models.catalog import parse_gpu
from posttrain.models.container import (
    CONTAINER_BOOT_S,
    CONTAINER_END_S,
    Container,
    container_for_model,
    worst_case_s,
)
from posttrain.runs.backend import Generate
from posttrain.runs.held import is_held
from posttrain.runs.inputs import modal_inputs
from posttrain.runs.layout import (
    EVENTS,
    FINAL_STATUSES,
    HOLDOUT,
    RUN_META,
    SPEC,
    billed_usd_per_s,
    has_result,
    read_json,
    runs_root,
    write_json_atomic,
    write_result,
)
from posttrain.runs.queue import SUBMIT_GRACE_S
from posttrain.runs.run_lock import judging
from posttrain.runs.run_row import RunRow
from posttrain.spec.schema import RunSpec

APP_NAME, TRAIN_FUNCTION, GENERATE_FUNCTION = "posttrain", "train_run", "generate"
RUNS_VOLUME, RUNS_MOUNT = "posttrain-runs", "/runs"
SYNC_EVERY_S = 5.0  # at most one Volume read per run per this many seconds
# Trace files read from the Volume in one poll, at most this long (one file at least): a run
# traced every step has hundreds, one read each, and a poll must answer. The events mirrored
# stop before the first trace not yet read, so the index reads every trace with its file.
TRACE_READS_S = 5.0
TRACE_READERS = 8  # trace files read at once
DEPLOY_CHECK_EVERY_S = 60.0  # the deployed app's tags, read at most this often
# A call with no start of posttrain's code this long after its spawn is cancelled (a GPU queue,
# or a container that dies before posttrain runs: Modal restarts those forever).
NEVER_STARTED_S = 3600.0
OVERDUE_SLACK_S = 300.0  # past its billed window, before the launcher ends a silent call
STARTING = (
    "starting on Modal: nothing committed yet (the call waits for a GPU, its container starts, "
    "or its first commit is under 30 s away)"
)
NOT_CONFIGURED = (
    "Modal is not configured: run `modal token new` or set MODAL_TOKEN_ID/MODAL_TOKEN_SECRET; "
    "meanwhile `smoke_run` (or `posttrain smoke SPEC`) dry-runs this spec on this machine, "
    "free, on a stand-in of its model"
)


def _modal() -> Any:
    import modal

    return modal


class ModalBackend:
    name = "modal"

    def __init__(self, root: Path | None = None, sdk: Any = None) -> None:
        self.root = root or runs_root()
        self._sdk = sdk
        self._last_sync: dict[str, float] = {}
        self._tags: dict[str, str] = {}
        self._tags_read_at = 0.0

    @property
    def sdk(self) -> Any:
        """The modal SDK, imported on first use (the CLI should not pay for it otherwise)."""
        if self._sdk is None:
            self._sdk = _modal()
        return self._sdk

    # -- set-up checks, at once, never a hang ---------------------------------------------
    def check_configured(self) -> None:
        config = self.sdk.config.config
        if not (config.get("token_id") and config.get("token_secret")):
            raise BackendError(NOT_CONFIGURED)

    def ready(self) -> None:
        """Whether a run can start: a token in the environment or Modal's config file, and
        a deployed app that carries this posttrain (its tags: two quick calls to Modal)."""
        self.check_configured()
        self.deployed_tags()

    def deployed_tags(self) -> dict[str, str]:
        """The deployed app's tags, after checking they name this posttrain's fingerprint:
        a deploy of other code, or of other library versions, is refused."""
        if time.time() - self._tags_read_at < DEPLOY_CHECK_EVERY_S:
            return self._tags
        errors = self.sdk.exception
        try:
            tags = dict(self.sdk.App.lookup(APP_NAME).get_tags())
        except errors.AuthError:
            raise BackendError(NOT_CONFIGURED) from None
        except errors.NotFoundError:
            raise BackendError(
                f"the Modal app '{APP_NAME}' is not deployed: run `posttrain modal deploy` once "
                f"(and again after upgrading posttrain)"
            ) from None
        except network_errors(errors) as exc:
            raise BackendError(f"Modal cannot be reached ({type(exc).__name__}: {exc})") from None
        here = fingerprint()
        if tags.get(TAG_SOURCE) != here:
            deployed = tags.get(TAG_SOURCE) or "an older posttrain, without a fingerprint"
            raise BackendError(
                f"the deployed Modal app '{APP_NAME}' carries other code than this posttrain "
                f"(deployed: {deployed}; here: {here}): its runs would not run what `plan` and "
                f"the dry run checked. Run `posttrain modal deploy` to update it"
            )
        self._tags, self._tags_read_at = tags, time.time()
        return tags

    def _function(self, name: str = TRAIN_FUNCTION) -> Any:
        try:
            fn = self.sdk.Function.from_name(APP_NAME, name)
            fn.hydrate()
        except self.sdk.exception.AuthError:
            raise BackendError(NOT_CONFIGURED) from None
        except self.sdk.exception.NotFoundError:
            raise BackendError(
                f"the Modal function {APP_NAME}.{name} is not deployed: run `posttrain "
                f"modal deploy` once (and again after upgrading posttrain)"
            ) from None
        return fn

    def _volume(self) -> Any:
        try:
            volume = self.sdk.Volume.from_name(RUNS_VOLUME)
            volume.hydrate()
        except self.sdk.exception.NotFoundError:
            raise BackendError(
                f"the Modal Volume '{RUNS_VOLUME}' is missing: run `posttrain modal deploy`, "
                f"which creates it"
            ) from None
        return volume

    # -- start ----------------------------------------------------------------------------
    def submit(self, plan: Any, run_dir: Path) -> dict[str, Any]:
        """Upload the run's inputs and spawn the deployed function; the run folder (and the
        ledger's reservation) exist already, so nothing spawned is unknown to posttrain. The
        container asks for what the plan priced (GPUs, CPU cores, memory, request = limit)."""
        self.check_configured()
        spec = plan.spec
        gpu, count = parse_gpu(spec.gpu)
        fn = self._function()
        tags = self.deployed_tags()
        volume = self._volume()
        remote_spec = self._upload_inputs(spec, run_dir.name, volume)
        meta = read_json(run_dir / RUN_META)
        # what the plan priced (plan.estimate sizes it: models.container)
        container = Container(gpu, count, plan.cost.cpu_cores, plan.cost.memory_gib)
        options: dict[str, Any] = {
            "gpu": spec.gpu,
            # past the run's own deadline (its first start + timeout_s: gpu/attempts.py), so
            # the trainer stops itself first and writes final/; never billed past worst_case_s
            "timeout": int(spec.compute.timeout_s + CONTAINER_BOOT_S),
            **container.options(),
        }
        if secret := self._judge_secret(spec):
            # with_options(secrets=) replaces the function's own: keep the deployed HF secret
            deployed = [self.sdk.Secret.from_name(n) for n in [tags.get(TAG_HF_SECRET)] if n]
            options["secrets"] = [*deployed, secret]
        call = fn.with_options(**options).spawn(
            run_dir.name, json.dumps(remote_spec), count, json.dumps(meta)
        )
        return {
            "call_id": call.object_id,
            "gpu": gpu,
            "gpu_count": count,
            "cpu_cores": container.cores,
            "memory_gib": container.memory_gib,
            "usd_per_s": container.gpu_usd_per_s / count,  # one GPU's
            "container_usd_per_s": container.usd_per_s,  # every charge of the container
            "worst_case_s": worst_case_s(spec.compute.timeout_s),
            "submitted_at": time.time(),
        }

    def _judge_secret(self, spec: RunSpec) -> Any:
        """The Modal secret that carries a judge's API key into the trainer (by name: its
        value never passes through posttrain), or None."""
        if spec.reward is None or spec.reward.name != "judge":
            return None
        name = spec.reward.params.get("api_key_secret")
        return self.sdk.Secret.from_name(name) if name else None

    def withdraw(self, run_dir: Path, handle: dict[str, Any]) -> None:
        """Cancel a spawned call that could not be recorded (it must not run unknown)."""
        self.sdk.FunctionCall.from_id(handle["call_id"]).cancel(terminate_containers=True)

    def _upload_inputs(self, spec: RunSpec, run_id: str, volume: Any) -> dict[str, Any]:
        """Every local file the spec names goes to the Volume under the run's inputs/, or is
        refused naming it (posttrain.runs.inputs); the remote spec names the uploads relative
        to the run directory, where the trainer starts."""
        inputs = modal_inputs(spec)
        if inputs.uploads:
            with volume.batch_upload() as batch:
                for upload in inputs.uploads:
                    batch.put_file(str(upload.local), f"/{run_id}/{upload.remote}")
        return inputs.spec

    # -- follow ---------------------------------------------------------------------------
    def sync(self, run_dir: Path, force: bool = False) -> bool:
        """Mirror the Volume's events.jsonl and new trace files into the local run dir;
        True when the local copy grew."""
        now = time.time()
        if not force and now - self._last_sync.get(run_dir.name, 0) < SYNC_EVERY_S:
            return False
        if has_result(run_dir):
            return False  # final here: nothing on the Volume may rewrite the local record
        self._last_sync[run_dir.name] = now
        volume = self.sdk.Volume.from_name(RUNS_VOLUME)
        remote = f"/{run_dir.name}"
        try:
            events = b"".join(volume.read_file(f"{remote}/{EVENTS}"))
        except FileNotFoundError:  # what the SDK raises for a missing file (modal/volume.py)
            return False  # the container has not committed anything yet
        events = _with_traces(volume, remote, run_dir, events, None if force else TRACE_READS_S)
        local = run_dir / EVENTS
        current = local.stat().st_size if local.exists() else 0
        grew = len(events) > current
        if grew:
            tmp = run_dir / f".{EVENTS}.part"
            tmp.write_bytes(events)
            os.replace(tmp, local)
        if not (run_dir / HOLDOUT).exists():  # written once, at the start: evaluate reads it
            with contextlib.suppress(FileNotFoundError):
                (run_dir / HOLDOUT).write_bytes(b"".join(volume.read_file(f"{remote}/{HOLDOUT}")))
        return grew

    def _call(self, run_dir: Path) -> Any:
        call_id = read_json(run_dir / RUN_META).get("call_id")
        if not call_id:
            raise BackendError(f"run {run_dir.name} has no Modal call id in run.json")
        return self.sdk.FunctionCall.from_id(call_id)

    def outcome(self, run_dir: Path) -> tuple[str, str | None] | None:
        """(status, cause) once the call has ended; None while it runs. Network errors
        propagate (the caller marks the run unreachable, never failed)."""
        errors = self.sdk.exception
        try:
            returned = self._call(run_dir).get(timeout=0)
        except TimeoutError:  # the builtin one: no output yet, the call is still running
            return None
        except errors.FunctionTimeoutError:
            timeout = read_json(run_dir / SPEC).get("compute", {}).get("timeout_s")
            return "failed", f"the run hit its timeout ({timeout} s) on Modal"
        except errors.InputCancellation:
            return "cancelled", "cancelled on Modal"
        except network_errors(errors):  # the link, not the run: the caller says unreachable
            raise
        except errors.OutputExpiredError:
            return "failed", "the call's result expired on Modal before it was read"
        except Exception as exc:  # the function's own exception, re-raised here by Modal
            text = f"{type(exc).__name__}: {exc}".removeprefix("RuntimeError: posttrain on Modal: ")
            if "cancel" in text.lower() or "terminat" in text.lower():
                return "cancelled", f"cancelled on Modal ({text[:200]})"
            return "failed", f"the Modal function failed: {text[:500]}"
        if returned in FINAL_STATUSES:
            return returned, None
        return "failed", f"the Modal function returned {returned!r}"

    def reconcile(self, run_dir: Path) -> bool:
        """Sync from the Volume; when the call has ended without a result in the run
        directory, write it. Only while holding the run's lock (never for a run another
        process is launching) and only for a run with a recorded call id: the call is the
        proof. A network error leaves the run as it was, marked unreachable."""
        if has_result(run_dir) or is_held(run_dir):
            return False  # final, or waiting for its place in its experiment (runs.held)
        with judging(run_dir) as mine:
            if not mine:
                return False  # its launcher is starting it, or another reader judges it
            if not read_json(run_dir / RUN_META).get("call_id"):
                return self._abandoned_launch(run_dir)
            return self._reconcile_call(run_dir)

    def _abandoned_launch(self, run_dir: Path) -> bool:
        """A run whose launcher let go of it without recording a call id: the launcher
        ended between reserve and record. Failed once that is past doubt."""
        meta = read_json(run_dir / RUN_META)
        if time.time() - float(meta.get("created_at") or 0) < SUBMIT_GRACE_S:
            return False
        write_result(
            run_dir,
            "failed",
            "its launch was interrupted before the Modal call id was recorded (the process "
            "that launched it ended between reserve and record). If the spawn had happened, "
            "a call of the deployed posttrain app may be running that posttrain cannot follow: "
            "look in the Modal dashboard and stop it there",
        )
        return True

    def _reconcile_call(self, run_dir: Path) -> bool:
        meta_path = run_dir / RUN_META
        grew = False
        try:
            grew = self.sync(run_dir)
            ended = self.outcome(run_dir)
            if ended is not None:
                grew = self.sync(run_dir, force=True) or grew
        except network_errors(self.sdk.exception) as exc:
            meta = read_json(meta_path)
            meta.setdefault("unreachable_since", time.time())
            meta["unreachable_error"] = f"{type(exc).__name__}: {exc}"[:300]
            write_json_atomic(meta_path, meta)
            return grew
        meta = read_json(meta_path)
        if "unreachable_since" in meta:
            meta.pop("unreachable_since")
            meta.pop("unreachable_error", None)
            write_json_atomic(meta_path, meta)
        if ended is None and not has_result(run_dir) and (overdue := self._overdue(run_dir)):
            try:
                self._call(run_dir).cancel(terminate_containers=True)
            except network_errors(self.sdk.exception):
                return grew  # not cancelled: asked again on the next poll
            write_result(run_dir, "failed", overdue)
            return True
        if ended is None or has_result(run_dir):
            return grew
        status, cause = ended
        write_result(
            run_dir, status, cause or f"the Modal call ended ({status}) without a result event"
        )
        return True

    def _overdue(self, run_dir: Path) -> str | None:
        """Why a call still running must be ended now, or None: it never started posttrain's
        code in NEVER_STARTED_S, or it runs past the most it may be billed (its timeout and
        two container starts) by OVERDUE_SLACK_S. posttrain.gpu.attempts keeps a run inside
        that window; this catches a container that never gets that far (an image that cannot
        import posttrain crash-loops, and Modal restarts a deployed app's crashes forever)."""
        meta = read_json(run_dir / RUN_META)
        now = time.time()
        submitted = float(meta.get("submitted_at") or now)
        window = float(meta.get("worst_case_s") or 0)
        first_start = first_event_time(run_dir)
        if first_start is None and now - submitted > NEVER_STARTED_S:
            return (
                f"no event from Modal {now - submitted:.0f} s after its launch: the call waited "
                f"for a GPU all that time, or its container could not start posttrain (see the "
                f"call's logs in the Modal dashboard); posttrain cancelled it. Launch it again"
            )
        if first_start is not None and window and now - first_start > window + OVERDUE_SLACK_S:
            return (
                f"still running {now - first_start:.0f} s after its first start, past the most "
                f"it may be billed ({window:.0f} s); posttrain cancelled it"
            )
        return None

    def waiting(self, run_dir: Path) -> str | None:
        """What a launched run waits for before its first event: its container."""
        if has_result(run_dir) or not read_json(run_dir / RUN_META).get("call_id"):
            return None
        path = run_dir / EVENTS
        return STARTING if not path.exists() or path.stat().st_size == 0 else None

    def leftover(self, run_dir: Path) -> list[str]:
        """Nothing: a Modal run's final status comes from its call (or from terminating
        its containers), never from a guess."""
        return []

    def unreachable(self, run_dir: Path) -> str | None:
        meta = read_json(run_dir / RUN_META)
        if "unreachable_since" not in meta or has_result(run_dir):
            return None
        since = time.time() - meta["unreachable_since"]
        return (
            f"Modal unreachable for {since:.0f} s ({meta.get('unreachable_error')}); "
            f"retrying on every poll, the run is not marked failed"
        )

    def cancel(self, run_dir: Path, grace_s: float = 0.0) -> dict[str, Any]:
        """Terminate the call's containers and record the cancellation, whatever the Volume
        holds (nothing at all, before the first commit)."""
        if has_result(run_dir):
            return {"stopped": True, "how": "already finished", "forced": False}
        try:
            self._call(run_dir).cancel(terminate_containers=True)
        except network_errors(self.sdk.exception) as exc:
            raise BackendError(
                f"could not reach Modal to cancel run {run_dir.name} ({type(exc).__name__}: "
                f"{exc}); it may still be running: cancel it again, or stop it in the Modal "
                f"dashboard"
            ) from None
        with contextlib.suppress(*network_errors(self.sdk.exception)):
            self.sync(run_dir, force=True)  # what it wrote up to its last commit, if anything
        if not has_result(run_dir):
            checkpoints = sorted(
                e.get("step", 0) for e in _events(run_dir) if e.get("type") == "checkpoint"
            )
            last = f"; last checkpoint at step {checkpoints[-1]}" if checkpoints else ""
            write_result(
                run_dir, "cancelled", f"cancelled by request: Modal terminated the containers{last}"
            )
        return {"stopped": True, "how": "Modal terminated the containers", "forced": True}

    def generator(self, run_dir: Path, gpu: str | None, timeout_s: int) -> Generate:
        """A function job -> completions that runs the deployed `generate` on Modal."""
        self.check_configured()
        gpu = gpu or "H100"

        model = (read_json(run_dir / SPEC).get("model") or {}).get("name") or ""
        container = container_for_model(*parse_gpu(gpu), model)  # as evaluate priced it

        def generate(job: dict[str, Any]) -> dict[str, Any]:
            self.deployed_tags()
            fn = self._function(GENERATE_FUNCTION)
            # past the evaluation's own window (its first start + timeout_s), as a run's
            options = {
                "gpu": gpu,
                "timeout": int(timeout_s + CONTAINER_BOOT_S),
                **container.options(),
            }
            answer = fn.with_options(**options).remote(run_dir.name, json.dumps(job), timeout_s)
            return json.loads(answer)

        return generate

    def cost_usd(self, row: RunRow) -> float:
        meta = read_json(row.path / RUN_META)
        start = meta.get("submitted_at") or meta.get("created_at") or row.created_at
        if not start:
            return 0.0
        # from the spawn (an upper bound: Modal bills from the container's start) to the run's
        # result, and the container's end after it (its last commit and exit are billed too)
        end = row.ended_at + CONTAINER_END_S if row.ended_at else time.time()
        return round(max(0.0, end - start) * billed_usd_per_s(meta), 4)

    def pull(self, run_dir: Path, out: Path, folder: str = "final") -> list[Path]:
        """Download the run's `folder` (final/: its adapter or weights) from the Volume."""
        volume = self.sdk.Volume.from_name(RUNS_VOLUME)
        remote = f"/{run_dir.name}/{folder}"
        written = []
        try:
            entries = volume.listdir(remote, recursive=True)
        except self.sdk.exception.NotFoundError:
            raise BackendError(f"run {run_dir.name} has no {folder}/ on the Volume yet") from None
        for entry in entries:
            # a FileEntryType (an IntEnum: str() of it is "1" or "2"): files only
            if getattr(entry.type, "name", None) != "FILE":
                continue
            rel = (
                Path(entry.path).relative_to(remote.lstrip("/"))
                if not entry.path.startswith("/")
                else Path(entry.path).relative_to(remote)
            )
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(b"".join(volume.read_file(f"{remote}/{rel}")))
            written.append(target)
        return written


def _with_traces(
    volume: Any, remote: str, run_dir: Path, events: bytes, budget_s: float | None
) -> bytes:
    """Copy the trace files the events name that this machine lacks, in the events' order,
    TRACE_READERS at a time (each read is a round trip), for at most budget_s (None: all of
    them); the events up to the first trace not copied."""
    missing: list[tuple[int, str]] = []  # (where its event starts, its file's name)
    position = 0
    for line in events.splitlines(keepends=True):
        name = _trace_name(line)
        if name and not (run_dir / "traces" / name).exists():
            missing.append((position, name))
        position += len(line)
    if not missing:
        return events
    (run_dir / "traces").mkdir(exist_ok=True)

    def copy(name: str) -> None:
        target = run_dir / "traces" / name
        part = target.with_name(f".{name}.part")  # whole or not at all
        with contextlib.suppress(FileNotFoundError):  # named, not committed: none to read
            part.write_bytes(b"".join(volume.read_file(f"{remote}/traces/{name}")))
            os.replace(part, target)

    deadline = None if budget_s is None else time.monotonic() + budget_s
    with ThreadPoolExecutor(TRACE_READERS) as pool:
        for first in range(0, len(missing), TRACE_READERS):
            if first and deadline is not None and time.monotonic() > deadline:
                return events[: missing[first][0]]  # the rest on the next poll
            list(pool.map(copy, [name for _, name in missing[first : first + TRACE_READERS]]))
    return events


def _trace_name(line: bytes) -> str | None:
    """The file name of a trace event's `traces/NAME.jsonl`, or None for any other line."""
    if b'"trace"' not in line or not line.endswith(b"\n"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    path = str(event.get("path", "")) if isinstance(event, dict) else ""
    folder, _, name = path.partition("/")
    if event.get("type") != "trace" or folder != "traces" or "/" in name:
        return None
    return name if name.endswith(".jsonl") and not name.startswith(".") else None


def network_errors(errors: Any) -> tuple[type[BaseException], ...]:
    """What the modal SDK raises when Modal cannot be reached: its ConnectionError (a socket
    error after its retries), ServiceError (Modal answered 'unavailable'), and the builtin
    ConnectionError of a dropped link. Never an OSError in general: a
    missing file on the Volume is a FileNotFoundError, and the function's own failure reaches
    here as a RuntimeError (posttrain.gpu.modal_app.run_training)."""
    return (errors.ConnectionError, errors.ServiceError, ConnectionError)


def first_event_time(run_dir: Path) -> float | None:
    """When the run's first event was written (its container's first start), from the first
    line alone: asked on every poll, never the whole log."""
    try:
        with (run_dir / EVENTS).open("rb") as f:
            return float(json.loads(f.readline())["t"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _events(run_dir: Path) -> list[dict[str, Any]]:
    from posttrain.runs.layout import iter_events

    return list(iter_events(run_dir))
