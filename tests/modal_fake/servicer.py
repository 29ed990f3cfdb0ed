"""The fake platform's wire: Modal's gRPC service (the methods posttrain's paths call) and an
HTTP server for Volume blocks, both answering as Modal's servers do for the SDK to read.

A method posttrain never calls answers UNIMPLEMENTED naming itself, so a new SDK path shows up
as a clear failure, never as a silent default.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
import time
from pathlib import Path
from typing import Any

import grpclib.server
from aiohttp import web
from google.protobuf.empty_pb2 import Empty
from grpclib import GRPCError, Status
from modal._serialization import deserialize_data_format, serialize_data_format
from modal._utils.blob_utils import BLOCK_SIZE
from modal_proto import api_grpc, api_pb2

from tests.modal_fake.platform import FakeModal

FS_V2 = api_pb2.VOLUME_FS_VERSION_V2


class Servicer(api_grpc.ModalClientBase):
    def __init__(self, fake: FakeModal) -> None:
        self.fake = fake

    async def _recv(self, stream: Any) -> Any:
        request = await stream.recv_message()
        name = getattr(stream, "_method_name", "?").rsplit("/", 1)[-1]
        self.fake.requests.append((name, request))
        return request

    def _container(self, stream: Any) -> int | None:
        token = dict(stream.metadata or {}).get("x-modal-token-id", "")
        return int(token.rsplit("-", 1)[1]) if token.startswith("ak-container-") else None

    # -- client ---------------------------------------------------------------------------
    async def ClientHello(self, stream: Any) -> None:
        await self._recv(stream)
        await stream.send_message(api_pb2.ClientHelloResponse())

    async def AuthTokenGet(self, stream: Any) -> None:
        await self._recv(stream)
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=""))

    async def EnvironmentGetOrCreate(self, stream: Any) -> None:
        await self._recv(stream)
        await stream.send_message(
            api_pb2.EnvironmentGetOrCreateResponse(
                environment_id="en-fake",
                metadata=api_pb2.EnvironmentMetadata(
                    name="main",
                    settings=api_pb2.EnvironmentSettings(image_builder_version="2025.06"),
                ),
            )
        )

    # -- apps and deploy ------------------------------------------------------------------
    async def AppGetByDeploymentName(self, stream: Any) -> None:
        req = await self._recv(stream)
        app = self.fake.apps.get(req.name)
        await stream.send_message(
            api_pb2.AppGetByDeploymentNameResponse(app_id=app["app_id"] if app else "")
        )

    async def AppCreate(self, stream: Any) -> None:
        req = await self._recv(stream)
        app_id = self.fake.new_id("ap")
        self.fake.apps.setdefault(
            req.description, {"app_id": app_id, "tags": {}, "objects": {}, "published": False}
        )
        self.fake.apps[req.description]["app_id"] = app_id
        await stream.send_message(api_pb2.AppCreateResponse(app_id=app_id))

    def _app_by_id(self, app_id: str) -> tuple[str, dict[str, Any]]:
        for name, app in self.fake.apps.items():
            if app["app_id"] == app_id:
                return name, app
        raise GRPCError(Status.NOT_FOUND, f"App {app_id} not found")

    async def AppGetOrCreate(self, stream: Any) -> None:
        req = await self._recv(stream)
        app = self.fake.apps.get(req.app_name)
        if app is None or not app["published"]:
            raise GRPCError(Status.NOT_FOUND, f"App '{req.app_name}' not found")
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=app["app_id"]))

    async def AppGetTags(self, stream: Any) -> None:
        req = await self._recv(stream)
        _, app = self._app_by_id(req.app_id)
        await stream.send_message(api_pb2.AppGetTagsResponse(tags=app["tags"]))

    async def AppPublish(self, stream: Any) -> None:
        req = await self._recv(stream)
        _, app = self._app_by_id(req.app_id)
        app["published"] = True
        app["tags"] = dict(req.tags)
        app["function_ids"] = dict(req.function_ids)
        app["objects"] = {
            self.fake.functions[f].function_name: f for f in req.function_ids.values()
        } | {tag: f for tag, f in req.function_ids.items()}
        await stream.send_message(api_pb2.AppPublishResponse(url="https://fake.modal.run"))

    async def AppGetLayout(self, stream: Any) -> None:
        req = await self._recv(stream)
        _, app = self._app_by_id(req.app_id)
        ids = app.get("function_ids", {})
        objects = [
            api_pb2.Object(
                object_id=f,
                function_handle_metadata=self._metadata(f, self.fake.functions[f].function_name),
            )
            for f in ids.values()
        ]
        await stream.send_message(
            api_pb2.AppGetLayoutResponse(
                app_layout=api_pb2.AppLayout(objects=objects, function_ids=ids)
            )
        )

    async def AppSetObjects(self, stream: Any) -> None:
        await self._recv(stream)
        await stream.send_message(Empty())

    async def AppClientDisconnect(self, stream: Any) -> None:
        await self._recv(stream)
        await stream.send_message(Empty())

    async def AppHeartbeat(self, stream: Any) -> None:
        await self._recv(stream)
        await stream.send_message(Empty())

    async def ImageGetOrCreate(self, stream: Any) -> None:
        await self._recv(stream)
        await stream.send_message(
            api_pb2.ImageGetOrCreateResponse(
                image_id=self.fake.new_id("im"),
                result=api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS),
                metadata=api_pb2.ImageMetadata(),
            )
        )

    async def MountGetOrCreate(self, stream: Any) -> None:
        await self._recv(stream)
        await stream.send_message(
            api_pb2.MountGetOrCreateResponse(
                mount_id=self.fake.new_id("mo"), handle_metadata=api_pb2.MountHandleMetadata()
            )
        )

    async def MountBatchedCheckExistence(self, stream: Any) -> None:
        await self._recv(stream)  # every file of a mount "exists": see MountPutFile
        await stream.send_message(api_pb2.MountBatchedCheckExistenceResponse())

    async def MountPutFile(self, stream: Any) -> None:
        await self._recv(stream)  # the containers run this machine's posttrain: kept nowhere
        await stream.send_message(api_pb2.MountPutFileResponse(exists=True))

    async def FunctionPrecreate(self, stream: Any) -> None:
        req = await self._recv(stream)
        function_id = self.fake.new_id("fu")
        await stream.send_message(
            api_pb2.FunctionPrecreateResponse(
                function_id=function_id,
                handle_metadata=self._metadata(function_id, req.function_name),
            )
        )

    async def FunctionCreate(self, stream: Any) -> None:
        req = await self._recv(stream)
        function_id = req.existing_function_id or self.fake.new_id("fu")
        stored = api_pb2.Function()
        if req.HasField("function"):
            stored.CopyFrom(req.function)
        else:  # several GPU types ranked: the first one's definition
            stored.CopyFrom(req.function_data.ranked_functions[0].function)
        self.fake.functions[function_id] = stored
        self.fake.function_app[function_id] = req.app_id
        data = function_data(stored)
        await stream.send_message(
            api_pb2.FunctionCreateResponse(
                function_id=function_id,
                function=stored,
                function_data=data,
                handle_metadata=self._metadata(function_id, stored.function_name),
            )
        )

    def _metadata(self, function_id: str, name: str) -> api_pb2.FunctionHandleMetadata:
        return api_pb2.FunctionHandleMetadata(
            function_name=name,
            function_type=api_pb2.Function.FUNCTION_TYPE_FUNCTION,
            supported_input_formats=[api_pb2.DATA_FORMAT_PICKLE, api_pb2.DATA_FORMAT_CBOR],
            supported_output_formats=[api_pb2.DATA_FORMAT_PICKLE, api_pb2.DATA_FORMAT_CBOR],
            base_function_id=function_id,
        )

    # -- functions: lookup, options, calls ------------------------------------------------
    async def FunctionGet(self, stream: Any) -> None:
        req = await self._recv(stream)
        app = self.fake.apps.get(req.app_name)
        if app is None or not app["published"]:
            raise GRPCError(
                Status.NOT_FOUND,
                f"Lookup failed for Function '{req.object_tag}' "
                f"from the '{req.app_name}' app: App not found",
            )
        function_id = app["objects"].get(req.object_tag)
        if function_id is None:
            raise GRPCError(Status.NOT_FOUND, f"Function '{req.object_tag}' not found")
        name = self.fake.functions[function_id].function_name
        await stream.send_message(
            api_pb2.FunctionGetResponse(
                function_id=function_id,
                handle_metadata=self._metadata(function_id, name),
                function=function_data(self.fake.functions[function_id]),
            )
        )

    async def FunctionBindParams(self, stream: Any) -> None:
        req = await self._recv(stream)
        base = self.fake.functions[req.function_id]
        bound = with_options(base, req.function_options)
        function_id = self.fake.new_id("fu")
        self.fake.functions[function_id] = bound
        await stream.send_message(
            api_pb2.FunctionBindParamsResponse(
                bound_function_id=function_id,
                handle_metadata=self._metadata(function_id, bound.function_name),
            )
        )

    async def FunctionMap(self, stream: Any) -> None:
        req = await self._recv(stream)
        definition = self.fake.functions[req.function_id]
        (item,) = req.pipelined_inputs
        args, kwargs = deserialize_data_format(item.input.args, item.input.data_format, None)
        call_id = self.fake.spawn(req.function_id, definition, tuple(args), dict(kwargs))
        await stream.send_message(
            api_pb2.FunctionMapResponse(
                function_call_id=call_id,
                retry_policy=definition.retry_policy,
                function_call_jwt=f"jwt-{call_id}",
                pipelined_inputs=[
                    api_pb2.FunctionPutInputsResponseItem(
                        idx=0, input_id="in-fake", input_jwt=f"jwt-in-{call_id}"
                    )
                ],
                sync_client_retries_enabled=False,  # the platform retries, not the client
                max_inputs_outstanding=1000,
            )
        )

    async def FunctionGetOutputs(self, stream: Any) -> None:
        req = await self._recv(stream)
        call = self.fake.calls.get(req.function_call_id)
        if call is None:
            raise GRPCError(Status.NOT_FOUND, f"Function call {req.function_call_id} not found")
        deadline = time.time() + max(0.0, req.timeout)
        while not call.done.is_set() and time.time() < deadline:
            await asyncio.sleep(0.05)
        if call.done.is_set() and call.output is not None:
            await stream.send_message(api_pb2.FunctionGetOutputsResponse(outputs=[call.output]))
        else:
            await stream.send_message(api_pb2.FunctionGetOutputsResponse(num_unfinished_inputs=1))

    async def FunctionCallCancel(self, stream: Any) -> None:
        req = await self._recv(stream)
        if req.function_call_id not in self.fake.calls:
            raise GRPCError(Status.NOT_FOUND, f"Function call {req.function_call_id} not found")
        threading.Thread(target=self.fake.cancel, args=(req.function_call_id,)).start()
        await stream.send_message(Empty())

    async def FunctionCallFromId(self, stream: Any) -> None:
        req = await self._recv(stream)
        call = self.fake.calls[req.function_call_id]
        await stream.send_message(
            api_pb2.FunctionCallFromIdResponse(
                function_call_id=call.call_id,
                num_inputs=1,
                metadata=api_pb2.FunctionCallHandleMetadata(function_id=call.function_id),
            )
        )

    # -- secrets --------------------------------------------------------------------------
    async def SecretGetOrCreate(self, stream: Any) -> None:
        req = await self._recv(stream)
        found = self.fake.secrets.get(req.deployment_name)
        if found is None:
            raise GRPCError(Status.NOT_FOUND, f"Secret '{req.deployment_name}' not found")
        await stream.send_message(
            api_pb2.SecretGetOrCreateResponse(
                secret_id=found[0], metadata=api_pb2.SecretMetadata(name=req.deployment_name)
            )
        )

    # -- volumes --------------------------------------------------------------------------
    async def VolumeGetOrCreate(self, stream: Any) -> None:
        req = await self._recv(stream)
        create = req.object_creation_type == api_pb2.OBJECT_CREATION_TYPE_CREATE_IF_MISSING
        volume_id = self.fake.volume_id(req.deployment_name, create)
        if volume_id is None:
            raise GRPCError(Status.NOT_FOUND, f"Volume '{req.deployment_name}' not found")
        await stream.send_message(
            api_pb2.VolumeGetOrCreateResponse(
                volume_id=volume_id,
                version=FS_V2,
                metadata=api_pb2.VolumeMetadata(name=req.deployment_name, version=FS_V2),
            )
        )

    async def VolumeCommit(self, stream: Any) -> None:
        req = await self._recv(stream)
        container = self._container(stream)
        if container is None:
            raise GRPCError(Status.FAILED_PRECONDITION, "commit is only possible in a container")
        self.fake.commit(container, req.volume_id)
        await stream.send_message(api_pb2.VolumeCommitResponse(skip_reload=True))

    async def VolumeReload(self, stream: Any) -> None:
        await self._recv(stream)
        await stream.send_message(Empty())

    def _file(self, volume_id: str, path: str) -> Path:
        return self.fake.committed(volume_id) / path.strip("/")

    async def VolumeGetFile2(self, stream: Any) -> None:
        req = await self._recv(stream)
        target = self._file(req.volume_id, req.path)
        if not target.is_file():
            raise GRPCError(Status.NOT_FOUND, f"No such file: {req.path}")
        data = target.read_bytes()[req.start :]
        data = data[: req.len] if req.len else data
        urls = []
        for offset in range(0, len(data), BLOCK_SIZE):
            token = hashlib.sha256(
                data[offset : offset + BLOCK_SIZE] + req.path.encode()
            ).hexdigest()
            self.fake.blocks[f"get-{token}"] = data[offset : offset + BLOCK_SIZE]
            urls.append(f"{self.fake.blocks_url}/block/get-{token}")
        await stream.send_message(
            api_pb2.VolumeGetFile2Response(
                get_urls=urls, size=target.stat().st_size, start=req.start, len=len(data)
            )
        )

    async def VolumeListFiles2(self, stream: Any) -> None:
        req = await self._recv(stream)
        base = self.fake.committed(req.volume_id)
        folder = base / req.path.strip("/")
        if not folder.exists():
            raise GRPCError(Status.NOT_FOUND, f"No such file or directory: {req.path}")
        items = (
            [folder]
            if folder.is_file()
            else (folder.rglob("*") if req.recursive else folder.iterdir())
        )
        entries = []
        for item in sorted(items):
            kind = (
                api_pb2.FileEntry.FileType.FILE
                if item.is_file()
                else (api_pb2.FileEntry.FileType.DIRECTORY)
            )
            stat = item.stat()
            entries.append(
                api_pb2.FileEntry(
                    path=str(item.relative_to(base)),
                    type=kind,
                    mtime=int(stat.st_mtime),
                    size=stat.st_size if item.is_file() else 0,
                )
            )
        await stream.send_message(api_pb2.VolumeListFiles2Response(entries=entries))

    async def VolumePutFiles2(self, stream: Any) -> None:
        req = await self._recv(stream)
        missing = []
        for i, f in enumerate(req.files):
            for j, block in enumerate(f.blocks):
                if block.contents_sha256.hex() not in self.fake.blocks:
                    missing.append(
                        api_pb2.VolumePutFiles2Response.MissingBlock(
                            file_index=i, block_index=j, put_url=f"{self.fake.blocks_url}/block/put"
                        )
                    )
        if not missing:
            for f in req.files:
                target = self._file(req.volume_id, f.path)
                if target.exists() and req.disallow_overwrite_existing_files:
                    raise GRPCError(Status.ALREADY_EXISTS, f"{f.path}: already exists")
                data = b"".join(self.fake.blocks[b.contents_sha256.hex()] for b in f.blocks)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data[: f.size].ljust(f.size, b"\0"))
        await stream.send_message(api_pb2.VolumePutFiles2Response(missing_blocks=missing))


def function_data(stored: api_pb2.Function) -> api_pb2.FunctionData:
    """A stored definition as the SDK reads it back (FunctionInfo._from_function_proto)."""
    return api_pb2.FunctionData(
        module_name=stored.module_name,
        function_name=stored.function_name,
        timeout_secs=stored.timeout_secs,
        ranked_functions=[api_pb2.FunctionData.RankedFunction(rank=0, function=stored)],
    )


def with_options(base: api_pb2.Function, options: api_pb2.FunctionOptions) -> api_pb2.Function:
    """A deployed function's definition under `with_options`, as the platform applies it:
    the options given replace the function's own (secrets and volumes whole)."""
    bound = api_pb2.Function()
    bound.CopyFrom(base)
    if options.replace_secret_ids:
        del bound.secret_ids[:]
        bound.secret_ids.extend(options.secret_ids)
    if options.replace_volume_mounts:
        del bound.volume_mounts[:]
        bound.volume_mounts.extend(options.volume_mounts)
    if options.HasField("resources"):
        bound.resources.CopyFrom(options.resources)
    if options.HasField("retry_policy"):
        bound.retry_policy.CopyFrom(options.retry_policy)
    if options.HasField("timeout_secs"):
        bound.timeout_secs = options.timeout_secs
    return bound


def unimplemented(cls: type) -> type:
    """Every other method of Modal's service: UNIMPLEMENTED, naming itself."""
    for name in sorted(api_grpc.ModalClientBase.__abstractmethods__):
        if name in cls.__dict__:
            continue

        async def missing(self: Servicer, stream: Any, _name: str = name) -> None:
            await stream.recv_message()
            raise GRPCError(Status.UNIMPLEMENTED, f"the fake Modal has no {_name}")

        setattr(cls, name, missing)
    cls.__abstractmethods__ = frozenset()
    return cls


unimplemented(Servicer)


class Network:
    """The gRPC listener, which can be taken down and brought back at the same port."""

    def __init__(self, fake: FakeModal) -> None:
        self.fake = fake
        self.server: grpclib.server.Server | None = None
        self.port = 0

    async def set(self, up: bool) -> None:
        if up and self.server is None:
            self.server = grpclib.server.Server([Servicer(self.fake)])
            factory = self.server._protocol_factory
            self.protocols: list[Any] = []

            def tracked() -> Any:  # every connection, so that going down can drop them all
                protocol = factory()
                self.protocols.append(protocol)
                return protocol

            self.server._protocol_factory = tracked  # type: ignore[method-assign]
            await self.server.start("127.0.0.1", self.port)
            self.port = self.server._server.sockets[0].getsockname()[1]
            self.fake.grpc_url = f"http://127.0.0.1:{self.port}"
        elif not up and self.server is not None:
            self.server.close()  # no new connection
            for protocol in self.protocols:  # and the open ones reset, as a dropped link does
                with contextlib.suppress(AttributeError):
                    protocol.connection._transport.abort()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 2)
            self.server = None


async def serve(fake: FakeModal, ready: threading.Event) -> None:
    fake._network = Network(fake)
    await fake._network.set(True)

    async def get_block(request: web.Request) -> web.Response:
        token = request.match_info["token"]
        if token not in fake.blocks:
            return web.Response(status=404, text="block not found")
        return web.Response(body=fake.blocks[token])

    async def put_block(request: web.Request) -> web.Response:
        data = await request.read()
        digest = hashlib.sha256(data).hexdigest()
        fake.blocks[digest] = data
        return web.Response(text=f"put:{digest}")

    app = web.Application(client_max_size=2 * BLOCK_SIZE)
    app.add_routes([web.get("/block/{token}", get_block), web.put("/block/put", put_block)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.blocks_url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    fake._stopping = asyncio.Event()
    ready.set()
    await fake._stopping.wait()
    await fake._network.set(False)
    await runner.cleanup()


__all__ = ["Servicer", "serialize_data_format", "serve"]
