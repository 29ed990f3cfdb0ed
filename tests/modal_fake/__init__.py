"""A fake Modal control plane under the real modal SDK, so the SDK's own classes run offline.

The tests' Modal is not a double of `modal`'s classes: it is a gRPC server that speaks Modal's
own protocol (`modal_proto.api_grpc.ModalClientBase`), beside an HTTP server for the Volume's
blocks, and the installed `modal` package talks to both through its real client (grpclib and
aiohttp), with MODAL_SERVER_URL pointing here. What the SDK raises or returns (a missing file's
FileNotFoundError, listdir's FileEntryType, `with_options` replacing the secrets, the
function's own exception re-raised by `FunctionCall.get`) is therefore the SDK's own answer.
Modal's own test suite does the same (its MockClientServicer, Apache-2.0); this one is written
for what posttrain uses.

What stands in for Modal's servers, and is only as true as its rules (written in one place,
`platform.py`, each with the documentation it follows):
- deploy: `posttrain.gpu.modal_app.app.deploy()` runs for real against it, so the deployed
  functions' definitions (timeout, retries, secrets, GPU, volumes, tags) are what the SDK sends;
- containers: each input runs in a subprocess that imports the deployed module and calls the
  function's own body; Volume mounts are per-container folders, seeded with the committed
  state, made durable only by `Volume.commit()` (the SDK's, over the wire);
- retries, timeouts, crashes, preemption and cancellation as Modal documents them, and a bill:
  each container's seconds at the function's resources.
"""

from tests.modal_fake.platform import FakeModal

__all__ = ["FakeModal"]
