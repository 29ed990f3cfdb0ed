"""A fork server for local runs: one process that has imported the trainer's libraries, and
forks each run's supervisor from that state; the supervisor forks its trainer in turn.

    python -m posttrain.runs.forkserver KEY

A trainer started as a new interpreter spends ~5 s of CPU importing torch, transformers,
TRL, peft and datasets before its first step: most of a smoke run on the tiny model (the
test suite starts ~45 trainers). Forked from a process that holds them already,
it imports only posttrain's own modules, from the source as it is now (they are not
preloaded here).

What stays as it was: the supervisor leads its own session and process group (a cancel or a
kill of the group reaches the trainer); the trainer is the supervisor's child, which waits
for it and records how it ended; each gets the launcher's environment and working directory.

One server serves one user and one environment. The key is a digest of the interpreter,
posttrain's location, this file, the libraries' versions, and every environment variable a
library may read at import
(all but POSTTRAIN_*, pytest's per-test ones and the thread counts, which each trainer sets),
so a launch from another environment gets its own server. It imports with one OpenMP thread
(a forked OpenMP pool does not work in the child), listens on an abstract Unix socket (no
file to go stale), checks that the peer is the same user both ways, and exits after IDLE_S
without a request. POSTTRAIN_FORKSERVER=0 turns it off.

The launcher (`spawn`) connects, sends the module to run (a run's supervisor, or a job
worker, which evaluates in its own process), and the forked process answers with its pid; it
runs only after the launcher's "go", so a launcher that gave up (and started the process
itself instead) never gets two. When no server answers it starts one for next time and
returns None.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import hashlib
import importlib
import importlib.metadata
import json
import logging
import os
import random
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import traceback
from pathlib import Path
from typing import IO, Any

from posttrain.core.priority import lower_priority

IDLE_S = 300.0  # a server with no request this long exits
REPLY_S = 30.0  # the launcher's wait for the forked supervisor's pid
GO_S = 60.0  # the forked supervisor's wait for the launcher's go
# The trainer's libraries (what `python -m posttrain.gpu.train` imports before step 1).
PRELOAD = (
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "transformers.generation.utils",
    "transformers.trainer",
    "accelerate",
    "datasets",
    "peft",
    "trl",
    "sentence_transformers",
)
# What a server forks on request: detached processes that run or evaluate a model.
SPAWNABLE = frozenset(
    {"posttrain.runs.supervisor", "posttrain.jobs.worker", "posttrain.gpu.export_weights"}
)
# Read when used, or set per trainer: they do not split servers.
UNKEYED_PREFIXES = ("POSTTRAIN_", "PYTEST_")
# ...and what torch sets on its own import: a launcher that has imported it (a test process,
# a CLI that evaluated) is the same environment as one that has not, and the server's own.
UNKEYED = frozenset(
    {
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "TORCHINDUCTOR_CACHE_DIR",
        "KMP_DUPLICATE_LIB_OK",
        "KMP_INIT_AT_FORK",
        # the terminal's size: read when a table is drawn (rich), never at import
        "COLUMNS",
        "LINES",
    }
)

log = logging.getLogger(__name__)


def server_key(env: dict[str, str]) -> str:
    import posttrain

    digest = hashlib.sha256()
    here = Path(__file__)
    parts = [sys.executable, str(Path(posttrain.__file__).parent), str(here.stat().st_mtime_ns)]
    for name in ("torch", "transformers", "accelerate", "datasets", "peft", "trl"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            parts.append(f"{name}=={importlib.metadata.version(name)}")
    parts += [
        f"{k}={v}"
        for k, v in sorted(env.items())
        if k not in UNKEYED and not k.startswith(UNKEYED_PREFIXES)
    ]
    digest.update("\0".join(parts).encode())
    return digest.hexdigest()[:24]


def address(key: str) -> str:
    return f"\0posttrain-forkserver-{os.getuid()}-{key}"


def listening(key: str) -> bool:
    """Whether a server for key is up and ready to fork."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(address(key))
        except OSError:
            return False
        return peer_uid(sock) == os.getuid()


def peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def enabled() -> bool:
    """On Linux (abstract sockets, peer credentials, pidfd), unless POSTTRAIN_FORKSERVER=0."""
    linux = sys.platform.startswith("linux") and hasattr(os, "pidfd_open")
    return linux and os.environ.get("POSTTRAIN_FORKSERVER", "1") != "0"


# --- The launcher's side -------------------------------------------------------------------


def start_server(key: str) -> subprocess.Popen:
    """Start a server for this environment, detached; it is ready for the next launch."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "posttrain.runs.forkserver", key],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )


def spawn(
    module: str,
    args: list[str],
    log_path: Path,
    env: dict[str, str] | None = None,
    exit_path: Path | None = None,
) -> int | None:
    """The pid of `python -m module args` (a supervisor, a job worker, an export) forked by
    this environment's server in a session of its own, output appended to log_path, its exit
    code written to exit_path when given; or None when there is none to ask (one is started
    for the next launch) or it did not answer: then the caller starts the process itself."""
    if not enabled() or module not in SPAWNABLE:
        return None
    env = dict(os.environ if env is None else env)
    key = server_key(env)
    request = {
        "module": module,
        "args": args,
        "log": str(log_path),
        "exit": str(exit_path) if exit_path else None,
        "cwd": os.getcwd(),
        "env": env,
    }
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.connect(address(key))
        except OSError:  # none listens: start one for the next launch
            start_server(key)
            return None
        if peer_uid(sock) != os.getuid():
            return None  # not ours: it hears nothing from us
        sock.settimeout(REPLY_S)
        sock.sendall(json.dumps(request).encode() + b"\n")
        reply = sock.makefile("rb").readline()
        pid = int(json.loads(reply)["pid"]) if reply else 0
        if pid <= 0:
            return None
        sock.sendall(b"go\n")  # from here the supervisor is this launch's, and it runs
        return pid
    except (OSError, ValueError, KeyError) as exc:  # a timeout included: it never starts
        log.warning("fork server did not answer (%s); starting the supervisor directly", exc)
        return None
    finally:
        sock.close()


def run_forked(module: str, args: list[str], log_path: Path, timeout_s: float) -> int | None:
    """`python -m module args` forked by this environment's server, waited for: its exit
    code (its output in log_path); None when no server forked it (the caller runs it itself).
    Past timeout_s it is killed with its process group and TimeoutExpired is raised, as
    subprocess.run does."""
    exit_path = log_path.with_name(log_path.name + ".exit")
    exit_path.unlink(missing_ok=True)
    pid = spawn(module, args, log_path, exit_path=exit_path)
    if pid is None:
        return None
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # ended already
        fd = None
    try:
        if fd is not None and not select.select([fd], [], [], timeout_s)[0]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # it leads its own group
            raise subprocess.TimeoutExpired(module, timeout_s)
    finally:
        if fd is not None:
            os.close(fd)
    try:
        return int(exit_path.read_text())
    except (OSError, ValueError):  # killed before it could write its code
        return -signal.SIGKILL
    finally:
        exit_path.unlink(missing_ok=True)


# --- The server ----------------------------------------------------------------------------


def preload() -> None:
    """Import the trainer's libraries, then freeze them out of the garbage collector: each
    forked trainer's collections (accelerate forces one as it starts, the interpreter runs a
    few more) would otherwise walk their ~10^6 objects, ~0.35 s each. Measured on a tiny
    run forked after the preload: 1.95 CPU-s, 1.28 with the freeze."""
    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # an optional one may be missing
            importlib.import_module(name)
    gc.freeze()  # the children inherit it; the libraries live as long as they do


def preloaded() -> bool:
    """Whether this process holds the trainer's libraries already (the server and the
    supervisors it forks): then a trainer is forked, not started as a new interpreter."""
    return all(name in sys.modules for name in ("torch", "transformers", "trl"))


def serve(key: str) -> int:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:  # the name first: of servers started at once, one preloads and the others leave
        listener.bind(address(key))
    except OSError:
        return 0
    lower_priority()  # its imports (~7 CPU-s) must not slow the server that started it
    preload()  # then listen: a launch that connects finds a server that forks at once
    listener.listen(64)
    listener.settimeout(IDLE_S)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            return 0
        with conn:
            if peer_uid(conn) != os.getuid():
                continue
            conn.settimeout(10)
            try:
                request = json.loads(conn.makefile("rb").readline())
            except (OSError, ValueError):
                continue
            if request.get("module") not in SPAWNABLE:
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            first = os.fork()
            if first == 0:  # forks the supervisor and leaves at once: init adopts it
                if os.fork() == 0:
                    listener.close()
                    _spawned(conn, request)
                os._exit(0)
            os.waitpid(first, 0)


def _spawned(conn: socket.socket, request: dict[str, Any]) -> None:
    """In the forked process: become the launcher's, then run its module on its go."""
    code = 1
    try:
        os.setsid()  # its own session and process group, as start_new_session gives
        conn.settimeout(GO_S)
        conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
        if conn.makefile("rb").readline().strip() != b"go":
            os._exit(0)  # the launcher gave up on this fork
        conn.close()
        os.chdir(request["cwd"])
        log_fd = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        code = run_module(request["module"], request["args"], request["env"], log_fd)
    except BaseException:  # a forked child must never return into the server
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        if request.get("exit"):  # for a launcher that waits: it is not this process's parent
            with contextlib.suppress(Exception):
                Path(request["exit"]).write_text(str(code))
        os._exit(code)


def run_module(module: str, args: list[str], env: dict[str, str], out_fd: int) -> int:
    """Run `python -m module args` in this forked process, as a new interpreter would:
    its environment, stdin from /dev/null, stdout and stderr to out_fd, default SIGTERM,
    no exit handler of the process it was forked from. Returns its exit code."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(devnull)
    os.close(out_fd)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(env)
    random.seed()
    if threads := env.get("OMP_NUM_THREADS"):
        import torch

        torch.set_num_threads(int(threads))
    atexit._clear()  # the server's own exit handlers are not this program's
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # printed, as the interpreter would
        traceback.print_exc()
        code = 1
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    return code


# --- The trainer, forked by a forked supervisor ---------------------------------------------


class ForkedTrainer:
    """What the supervisor needs of subprocess.Popen, for a trainer forked from it."""

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        if timeout is not None:
            fd = os.pidfd_open(self.pid)
            try:
                ready, _, _ = select.select([fd], [], [], timeout)
            finally:
                os.close(fd)
            if not ready:
                raise subprocess.TimeoutExpired(f"trainer {self.pid}", timeout)
        _, status = os.waitpid(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def fork_trainer(run_dir: Path, env: dict[str, str]) -> ForkedTrainer:
    """`python -m posttrain.gpu.train RUN_DIR`, forked from this preloaded process."""
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            code = run_module("posttrain.gpu.train", [str(run_dir)], env, write)
        finally:
            os._exit(code)
    os.close(write)
    return ForkedTrainer(pid, os.fdopen(read, "rb"))


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
