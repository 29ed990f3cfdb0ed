"""One fake container: import the deployed module, call the function's own body, write its output.

Run by the fake platform as `python -m tests.modal_fake.container PAYLOAD RESULT`. It plays
Modal's container entrypoint: the process is a Modal container (`modal.is_local()` is False
here, as `_TaskLifecycleManager` makes it in a real one), its Volumes are mounted (folders the
platform seeded with the committed state), and the body's return value or exception is
serialized with the SDK's own serializer, as the real entrypoint sends it back.
"""

from __future__ import annotations

import importlib
import os
import pickle
import sys
import traceback
import warnings
from pathlib import Path


def main(payload_path: str, result_path: str) -> None:
    import modal
    from modal._serialization import serialize

    modal.is_local = lambda: False  # a container, as Modal's entrypoint would make it
    payload = pickle.loads(Path(payload_path).read_bytes())
    module = importlib.import_module(payload["module"])
    function = getattr(module, payload["function"])
    try:
        with warnings.catch_warnings():  # .local()'s "no mounted Volume": this one has them
            warnings.simplefilter("ignore")
            value = function.local(*payload["args"], **payload["kwargs"])
        result = {"value": serialize(value)}
    except BaseException as exc:
        result = {
            "error": serialize(exc),
            "repr": repr(exc),
            "traceback": "".join(traceback.format_exception(exc)),
        }
    tmp = Path(result_path + ".part")
    tmp.write_bytes(pickle.dumps(result))
    os.replace(tmp, result_path)
    sys.stdout.flush()
    # like a container's end: no interpreter teardown that could outlive the output
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
