"""What posttrain relies on the modal SDK for, pinned against the installed SDK: its own classes
run over the fake control plane's wire (tests/modal_fake), so each answer below is the SDK's
code at work, not a double's belief. A new SDK release that changes one of them fails here,
naming it."""

import inspect

import modal
import pytest
from modal_proto import api_grpc

from posttrain.gpu import modal_app
from tests.modal_fake.servicer import Servicer

pytestmark = pytest.mark.slow


def test_the_fake_answers_only_methods_of_modals_own_service():
    ours = {name for name, _ in inspect.getmembers(Servicer, inspect.iscoroutinefunction)}
    theirs = set(api_grpc.ModalClientBase.__abstractmethods__)
    assert ours <= theirs | {"_recv"}  # a misspelt method would never be called


def test_a_missing_file_is_a_file_not_found_error_and_a_missing_folder_not_found(modal_fake):
    volume = modal.Volume.from_name(modal_app.RUNS_VOLUME)
    with pytest.raises(FileNotFoundError):
        b"".join(volume.read_file("/no-such-run/events.jsonl"))
    with pytest.raises(modal.exception.NotFoundError):
        volume.listdir("/no-such-run/traces")
    assert not issubclass(FileNotFoundError, modal.exception.Error)  # not Modal's own error


def test_listdir_entries_carry_an_int_enum_whose_str_is_a_digit(modal_fake):
    root = modal_fake.volume_path(modal_app.RUNS_VOLUME) / "run-sdk-1" / "final" / "sub"
    root.mkdir(parents=True)
    (root / "w.bin").write_bytes(b"\0" * 10)
    entries = modal.Volume.from_name(modal_app.RUNS_VOLUME).listdir("/run-sdk-1", recursive=True)
    kinds = {e.path: e.type for e in entries}
    assert kinds["run-sdk-1/final/sub"] == modal.volume.FileEntryType.DIRECTORY
    assert str(kinds["run-sdk-1/final/sub"]) == "2"  # the bug: "DIR" in str(...) never matched
    assert kinds["run-sdk-1/final/sub/w.bin"].name == "FILE"


def test_with_options_secrets_replace_the_functions_own(modal_fake):
    """The SDK sends replace_secret_ids: the platform drops the deployed secrets."""
    modal_fake.create_secret("one", {"A": "1"})
    fn = modal.Function.from_name(modal_app.APP_NAME, "train_run")
    fn.with_options(secrets=[modal.Secret.from_name("one")]).hydrate()
    [bind] = [r for name, r in modal_fake.requests if name == "FunctionBindParams"]
    assert bind.function_options.replace_secret_ids is True
    assert len(bind.function_options.secret_ids) == 1


def test_a_running_call_says_timeout_error_and_a_failed_one_reraises_its_own_exception(
    modal_fake,
):
    """FunctionCall.get(timeout=0): the builtin TimeoutError while running; once the function
    failed, its own exception (here run_training's, which names what it raised)."""
    modal_fake.gpus_free.clear()  # queued
    fn = modal.Function.from_name(modal_app.APP_NAME, "train_run").with_options(retries=0)
    call = fn.spawn("run-sdk-0002", "{not json", 1, "{}")
    again = modal.FunctionCall.from_id(call.object_id)
    with pytest.raises(TimeoutError):
        again.get(timeout=0)
    modal_fake.gpus_free.set()
    assert modal_fake.wait(call.object_id, 120)
    with pytest.raises(RuntimeError, match="posttrain on Modal: JSONDecodeError"):
        again.get(timeout=0)
