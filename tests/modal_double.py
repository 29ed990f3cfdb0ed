"""A thin double of the modal SDK: Function, FunctionCall, Volume and config, nothing more.

Spawning runs the real function body (posttrain.gpu.modal_app.run_training) in a thread,
writing into a folder that plays the Volume; the exceptions are modal's own classes.
Everything else is what the SDK would answer, without network and without tokens.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import modal.exception as modal_exception

from posttrain.gpu import modal_app


class Network:
    """One switch for the whole double: while down, every call fails as a dropped link would."""

    down = False

    @classmethod
    def check(cls) -> None:
        if cls.down:
            raise modal_exception.ConnectionError("connection reset by peer")


class Config:
    def __init__(self, token: bool) -> None:
        self.values = {"token_id": "ak-double", "token_secret": "as-double"} if token else {}

    def get(self, key: str) -> Any:
        return self.values.get(key)


@dataclass
class Entry:
    path: str
    type: str = "FILE"


class Volume:
    def __init__(self, root: Path) -> None:
        self.root = root

    def hydrate(self) -> Volume:
        return self

    def read_file(self, path: str):
        Network.check()
        target = self.root / path.lstrip("/")
        if not target.is_file():
            raise modal_exception.NotFoundError(f"{path} not found")
        yield target.read_bytes()

    def listdir(self, path: str, recursive: bool = False) -> list[Entry]:
        Network.check()
        folder = self.root / path.lstrip("/")
        if not folder.is_dir():
            raise modal_exception.NotFoundError(f"{path} not found")
        items = folder.rglob("*") if recursive else folder.iterdir()
        return [
            Entry(str(p.relative_to(self.root)), "FILE" if p.is_file() else "DIRECTORY")
            for p in sorted(items)
        ]

    def batch_upload(self):
        volume = self

        class Batch:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def put_file(self, local: str, remote: str) -> None:
                target = volume.root / remote.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(Path(local).read_bytes())

        return Batch()


class FunctionCall:
    registry: ClassVar[dict[str, FunctionCall]] = {}
    ids = itertools.count(1)

    def __init__(self, target, args) -> None:
        self.object_id = f"fc-double-{next(self.ids)}"
        self.result: Any = None
        self.error: BaseException | None = None
        self.cancelled = False
        self.cancel_calls: list[bool] = []
        self.thread = threading.Thread(target=self._run, args=(target, args), daemon=True)
        FunctionCall.registry[self.object_id] = self
        self.thread.start()

    def _run(self, target, args) -> None:
        try:
            self.result = target(*args)
        except BaseException as exc:  # what Modal would re-raise from .get()
            self.error = exc

    @classmethod
    def from_id(cls, call_id: str) -> FunctionCall:
        return cls.registry[call_id]

    def get(self, timeout: float | None = None):
        Network.check()
        if self.cancelled:
            raise modal_exception.InputCancellation("cancelled")
        if self.thread.is_alive():
            raise TimeoutError()
        if self.error is not None:
            raise self.error
        return self.result

    def cancel(self, terminate_containers: bool = False) -> None:
        self.cancel_calls.append(terminate_containers)
        self.cancelled = True


class Function:
    deployed = True
    spawned: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, body) -> None:
        self.body = body
        self.options: dict[str, Any] = {}

    @classmethod
    def from_name(cls, app: str, name: str) -> Function:
        if not cls.deployed:
            raise modal_exception.NotFoundError(f"App '{app}' not found")
        bodies = {"train_run": modal_app.run_training, "generate": modal_app.run_generation}
        return cls(bodies[name])

    def hydrate(self) -> Function:
        return self

    def with_options(self, **options: Any) -> Function:
        clone = Function(self.body)
        clone.options = options
        return clone

    def remote(self, *args: Any) -> Any:
        Network.check()
        Function.spawned.append({"args": args, "options": self.options, "remote": True})
        return self.body(*args)

    def spawn(self, *args: Any) -> FunctionCall:
        Function.spawned.append({"args": args, "options": self.options})
        return FunctionCall(self.body, args)


@dataclass(frozen=True)
class Secret:
    """A Modal secret by name: its values live on Modal, never here."""

    name: str

    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> Secret:
        return cls(name)


def sdk(volume_root: Path, token: bool = True, volume_exists: bool = True) -> SimpleNamespace:
    class Volumes:
        @staticmethod
        def from_name(name: str, **kwargs: Any) -> Volume:
            if not volume_exists:
                raise modal_exception.NotFoundError(f"Volume '{name}' not found")
            return Volume(volume_root)

    Function.spawned = []
    Network.down = False
    return SimpleNamespace(
        network=Network,
        config=SimpleNamespace(config=Config(token)),
        exception=modal_exception,
        Function=Function,
        FunctionCall=FunctionCall,
        Volume=Volumes,
        Secret=Secret,
    )
