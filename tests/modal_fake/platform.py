"""The fake platform: its state, its containers and its bill, with the rules Modal documents.

Rules, each from Modal's documentation or the SDK's source (modal 1.6.4):
- A Volume's committed state is what readers see; a container sees the committed state when it
  starts and makes its own writes durable only by `Volume.commit()` ("Volumes", and
  `Volume.commit`: "If successful, the changes made are now persisted").
- `with_options(secrets=...)` and `volumes=` replace the function's own ("container arguments
  like volumes and secrets will _replace_ the base configuration": `_Function.with_options`).
- An input whose function raises is retried `retries` times, each retry a new container with a
  fresh timeout; a timeout is a failure and is retried the same way ("Failures and retries";
  `RetryManager`). A container that crashes (exits without an output: OOM, a signal) is
  rescheduled, for a deployed app indefinitely, with a crash-loop backoff ("Container crashes").
  A preempted container gets an interrupt (SIGINT: Python's KeyboardInterrupt), then SIGKILL
  after a grace period, and its input is restarted without counting against `retries`
  ("Preemption": "Modal will send an interrupt signal (SIGINT) ... and restart it on the same
  input").
- `FunctionCall.cancel(terminate_containers=True)` kills the input's container; its output is
  GENERIC_STATUS_TERMINATED.
- Billing: every second a container runs, at the function's GPU, CPU and memory (the largest of
  request and limit, as `platform.PRICES` says; posttrain's own table is never read here).

Crash restarts are capped (`max_crash_restarts`) only so that a test cannot loop forever; a test
that hits the cap fails (`crash_cap_hit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modal_proto import api_pb2

ROOT = Path(__file__).resolve().parents[2]

# Modal's published rates, late 2026 ($/s): GPU by type, CPU per physical core, memory per GiB.
# Kept apart from posttrain's own table on purpose: the bill is the platform's, not the estimate's.
GPU_USD_PER_S = {
    "H200": 0.001261,
    "H100": 0.001097,
    "A100-80GB": 0.000694,
    "A100-40GB": 0.000583,
    "L40S": 0.000542,
    "A10": 0.000306,
    "L4": 0.000222,
    "T4": 0.000164,
}
CPU_CORE_USD_PER_S = 0.0000131
MEMORY_GIB_USD_PER_S = 0.00000222
DEFAULT_CPU_CORES = 0.125  # Modal's defaults when a function asks for nothing
DEFAULT_MEMORY_MIB = 128


@dataclass
class Attempt:
    container: int
    started: float
    ended: float | None = None
    how: str = "running"  # returned, raised, timeout, crashed, preempted, terminated


@dataclass
class Call:
    call_id: str
    function_id: str
    definition: api_pb2.Function  # the effective definition: deployed, then with_options
    args: tuple
    kwargs: dict
    attempts: list[Attempt] = field(default_factory=list)
    output: api_pb2.FunctionGetOutputsItem | None = None
    cancelled: bool = False
    preempt: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    proc: subprocess.Popen | None = None


@dataclass
class Container:
    number: int
    call_id: str
    mounts: dict[str, Path]  # volume id -> this container's view of it
    secrets_env: dict[str, str]


class FakeModal:
    """Modal's control plane, its Volumes and its containers, for the SDK to talk to."""

    def __init__(self, root: Path, time_scale: float = 0.01) -> None:
        self.time_scale = time_scale  # Modal's retry delays and backoffs, scaled for tests
        self.preemption_grace_s = 2.0
        self.max_crash_restarts = 6
        self.ids = itertools.count(1)
        self.lock = threading.RLock()
        self.grpc_url = self.blocks_url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._network: Any = None  # the servicer's switch (servicer.Network)
        self._stopping: asyncio.Event | None = None
        self.reset(root)

    def reset(self, root: Path) -> None:
        """A new, empty platform (nothing deployed, no Volume, no call) under `root`."""
        self.root = root
        self.apps: dict[str, dict[str, Any]] = {}  # name -> {app_id, tags, objects, published}
        self.functions: dict[str, api_pb2.Function] = {}
        self.function_app: dict[str, str] = {}
        self.volumes: dict[str, str] = {}  # name -> id
        self.secrets: dict[str, tuple[str, dict[str, str]]] = {}  # name -> (id, env)
        self.calls: dict[str, Call] = {}
        self.containers: dict[int, Container] = {}
        self.blocks: dict[str, bytes] = {}  # sha256 hex or get-token -> bytes
        self.clean()

    def clean(self) -> None:
        """Every call stopped, the network up, GPUs free, no request remembered."""
        for call in list(getattr(self, "calls", {}).values()):
            self.cancel(call.call_id)
        self.calls = {}
        self.crash_cap_hit = False
        self.gpus_free = threading.Event()  # cleared: every call waits for a GPU (queued)
        self.gpus_free.set()
        self.container_env: dict[str, str] = {}  # a test's changes to every container's env
        self.requests: list[tuple[str, Any]] = []  # (method, request) in order
        if self._network is not None and self._network.server is None:
            self.network(True)

    def snapshot(self) -> dict[str, Any]:
        """What is deployed and stored (apps, functions, Volumes, secrets), to restore."""
        return copy.deepcopy(
            {
                k: getattr(self, k)
                for k in ("apps", "functions", "function_app", "volumes", "secrets")
            }
        )

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.clean()
        for key, value in copy.deepcopy(snapshot).items():
            setattr(self, key, value)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeModal:
        from tests.modal_fake.servicer import serve

        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve(self, ready))

        self._thread = threading.Thread(target=run, name="fake-modal", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the fake Modal server did not start")
        return self

    def stop(self) -> None:
        for call in list(self.calls.values()):
            self.cancel(call.call_id)
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
            if self._thread is not None:
                self._thread.join(10)

    def network(self, up: bool) -> None:
        """Take the control plane off the network (connections refused) or back on, at the
        same address: what a dropped link looks like to the SDK."""
        assert self._loop is not None and self._network is not None
        asyncio.run_coroutine_threadsafe(self._network.set(up), self._loop).result(10)

    def env(self) -> dict[str, str]:
        """What points the real SDK at this platform (the credentials are this fake's own)."""
        return {
            "MODAL_SERVER_URL": self.grpc_url,
            "MODAL_TOKEN_ID": "ak-fake-launcher",
            "MODAL_TOKEN_SECRET": "as-fake-launcher",
        }

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-fake{next(self.ids)}"

    # -- volumes --------------------------------------------------------------------------
    def volume_id(self, name: str, create: bool) -> str | None:
        with self.lock:
            if name not in self.volumes and create:
                self.volumes[name] = self.new_id("vo")
                self.committed(self.volumes[name]).mkdir(parents=True, exist_ok=True)
            return self.volumes.get(name)

    def committed(self, volume_id: str) -> Path:
        """The Volume as every reader sees it: what containers committed, and uploads."""
        return self.root / "volumes" / volume_id

    def volume_path(self, name: str) -> Path:
        volume_id = self.volume_id(name, create=False)
        if volume_id is None:
            raise KeyError(f"no Volume named {name}")
        return self.committed(volume_id)

    def commit(self, container: int, volume_id: str) -> None:
        """A container's view of a Volume becomes the committed state (files it holds now)."""
        view = self.containers[container].mounts.get(volume_id)
        if view is None:
            raise KeyError(volume_id)
        target = self.committed(volume_id)
        with self.lock:
            for path in sorted(view.rglob("*")):
                if path.is_file():
                    dest = target / path.relative_to(view)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, dest)

    # -- secrets --------------------------------------------------------------------------
    def create_secret(self, name: str, env: dict[str, str]) -> str:
        with self.lock:
            self.secrets[name] = (self.new_id("st"), dict(env))
            return self.secrets[name][0]

    def secret_env(self, secret_ids: list[str]) -> dict[str, str]:
        env: dict[str, str] = {}
        for secret_id, values in self.secrets.values():
            if secret_id in secret_ids:
                env.update(values)
        return env

    # -- functions and calls -------------------------------------------------------------
    def spawn(
        self, function_id: str, definition: api_pb2.Function, args: tuple, kwargs: dict
    ) -> str:
        call = Call(self.new_id("fc"), function_id, definition, args, kwargs)
        with self.lock:
            self.calls[call.call_id] = call
        threading.Thread(target=self._run_call, args=(call,), daemon=True).start()
        return call.call_id

    def cancel(self, call_id: str) -> None:
        call = self.calls.get(call_id)
        if call is None or call.done.is_set():
            return
        call.cancelled = True
        if call.proc is not None and call.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(call.proc.pid, signal.SIGKILL)

    def preempt(self, call_id: str) -> None:
        """Preempt the call's current container: SIGINT, then SIGKILL after the grace."""
        call = self.calls[call_id]
        call.preempt.set()
        if call.proc is not None and call.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(call.proc.pid, signal.SIGINT)

    def billed_s(self, call_id: str) -> float:
        """Container seconds the platform bills for a call (every attempt, start to end)."""
        call = self.calls[call_id]
        now = time.time()
        return sum((a.ended or now) - a.started for a in call.attempts)

    def billed_usd(self, call_id: str) -> float:
        return self.billed_s(call_id) * usd_per_s(self.calls[call_id].definition)

    def _run_call(self, call: Call) -> None:
        retries_left = call.definition.retry_policy.retries
        crashes = 0
        delay_s = call.definition.retry_policy.initial_delay_ms / 1000 or 1.0
        while True:
            attempt, result = self._attempt(call)
            if attempt.how in ("returned", "terminated"):
                break
            if attempt.how == "preempted":
                continue  # rescheduled; not a retry
            if attempt.how == "crashed":
                crashes += 1
                if crashes > self.max_crash_restarts:  # Modal would go on: a test must fail
                    self.crash_cap_hit = True
                    result = output(
                        api_pb2.GenericResult(
                            status=api_pb2.GenericResult.GENERIC_STATUS_INTERNAL_FAILURE,
                            exception=f"the fake's crash cap: {crashes} crashes in a row",
                        ),
                        len(call.attempts) - 1,
                    )
                    break
                time.sleep(min(10.0, 2**crashes) * self.time_scale)  # crash-loop backoff
                continue
            if retries_left <= 0:  # raised or timed out, no retry left: the output stands
                break
            retries_left -= 1
            time.sleep(delay_s * self.time_scale)
            delay_s *= call.definition.retry_policy.backoff_coefficient or 1.0
        call.output = result
        call.done.set()

    def _attempt(self, call: Call) -> tuple[Attempt, api_pb2.FunctionGetOutputsItem | None]:
        number = next(self.ids)
        folder = self.root / "containers" / str(number)
        mounts = {}
        for mount in call.definition.volume_mounts:
            view = folder / "mounts" / mount.mount_path.strip("/")
            shutil.copytree(self.committed(mount.volume_id), view, dirs_exist_ok=True)
            mounts[mount.volume_id] = view
        container = Container(
            number, call.call_id, mounts, self.secret_env(list(call.definition.secret_ids))
        )
        self.containers[number] = container
        payload, result_file = folder / "payload.pkl", folder / "result.pkl"
        payload.write_bytes(
            pickle.dumps(
                {
                    "module": call.definition.module_name,
                    "function": call.definition.function_name,
                    "args": call.args,
                    "kwargs": call.kwargs,
                }
            )
        )
        env = {
            **os.environ,
            **self.env(),
            **container.secrets_env,
            "MODAL_TOKEN_ID": f"ak-container-{number}",
            "MODAL_TOKEN_SECRET": f"as-container-{number}",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        runs = [m for m in call.definition.volume_mounts if m.mount_path == "/runs"]
        if runs:
            env["POSTTRAIN_MODAL_RUNS_ROOT"] = str(mounts[runs[0].volume_id])
        while not self.gpus_free.wait(0.1) and not call.cancelled:
            pass  # queued: no container yet, nothing billed
        env.update(self.container_env)
        attempt = Attempt(number, time.time())
        call.attempts.append(attempt)
        if call.cancelled:
            attempt.ended, attempt.how = time.time(), "terminated"
            return attempt, terminated(call)
        log = (folder / "log.txt").open("wb")
        call.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.modal_fake.container", str(payload), str(result_file)],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timeout_s = call.definition.timeout_secs or 300
        timed_out, kill_at = False, None
        deadline = attempt.started + timeout_s
        while call.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                call.proc.wait(timeout=0.1)
            now = time.time()
            if call.preempt.is_set() and kill_at is None:
                kill_at = now + self.preemption_grace_s
            if now > deadline and call.proc.poll() is None:
                timed_out = True
                kill_at = now
            if kill_at is not None and now >= kill_at:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(call.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # the container ends whole
            os.killpg(call.proc.pid, signal.SIGKILL)
        log.close()
        attempt.ended = time.time()
        if call.cancelled:
            attempt.how = "terminated"
            return attempt, terminated(call)
        if call.preempt.is_set() and not _returned(result_file):
            call.preempt.clear()
            attempt.how = "preempted"
            return attempt, None
        call.preempt.clear()
        if timed_out:
            attempt.how = "timeout"
            return attempt, output(
                api_pb2.GenericResult(
                    status=api_pb2.GenericResult.GENERIC_STATUS_TIMEOUT,
                    exception=f"Function timed out after {timeout_s} seconds",
                ),
                len(call.attempts) - 1,
            )
        if not result_file.exists():
            attempt.how = "crashed"
            return attempt, None
        result = pickle.loads(result_file.read_bytes())
        if "value" in result:
            attempt.how = "returned"
            return attempt, output(
                api_pb2.GenericResult(
                    status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS, data=result["value"]
                ),
                len(call.attempts) - 1,
            )
        attempt.how = "raised"
        return attempt, output(
            api_pb2.GenericResult(
                status=api_pb2.GenericResult.GENERIC_STATUS_FAILURE,
                data=result["error"],
                exception=result["repr"],
                traceback=result["traceback"],
            ),
            len(call.attempts) - 1,
        )

    def wait(self, call_id: str, timeout_s: float) -> bool:
        return self.calls[call_id].done.wait(timeout_s)


def _returned(result_file: Path) -> bool:
    return result_file.exists() and "value" in pickle.loads(result_file.read_bytes())


def output(result: api_pb2.GenericResult, retry_count: int) -> api_pb2.FunctionGetOutputsItem:
    return api_pb2.FunctionGetOutputsItem(
        result=result,
        idx=0,
        input_id="in-fake",
        data_format=api_pb2.DATA_FORMAT_PICKLE,
        retry_count=retry_count,
    )


def terminated(call: Call) -> api_pb2.FunctionGetOutputsItem:
    return output(
        api_pb2.GenericResult(
            status=api_pb2.GenericResult.GENERIC_STATUS_TERMINATED,
            exception="Input was cancelled by the user",
        ),
        max(0, len(call.attempts) - 1),
    )


def usd_per_s(definition: api_pb2.Function) -> float:
    """What a second of this function's container costs on the platform's own price list."""
    r = definition.resources
    gpu = GPU_USD_PER_S.get(r.gpu_config.gpu_type.upper(), 0.0) * max(1, r.gpu_config.count or 0)
    cores = max(r.milli_cpu, r.milli_cpu_max) / 1000 or DEFAULT_CPU_CORES
    gib = (max(r.memory_mb, r.memory_mb_max) or DEFAULT_MEMORY_MIB) / 1024
    return gpu + cores * CPU_CORE_USD_PER_S + gib * MEMORY_GIB_USD_PER_S
