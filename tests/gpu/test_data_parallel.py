"""Training in several processes from the run directory, as the Modal function starts it: the
trainers import posttrain with only the environment they are given, and the run ends as its
directory says, whatever the launcher's exit code.

The Modal image carries posttrain as a source folder, not an installed package; here it is an
editable install, which any interpreter of .venv finds from anywhere. `image_python` is an
interpreter like the image's: every dependency of .venv importable, posttrain not."""

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from posttrain.gpu.data_parallel import PACKAGE_ROOT, child_env, train_data_parallel
from posttrain.runs.layout import CANCEL_REQUEST, RUN_META, SPEC, iter_events, write_json_atomic
from posttrain.spec.schema import load_spec
from tests.specs import tiny

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def image_python(tmp_path_factory) -> str:
    """A venv whose site-packages lists .venv's on a path line: the packages import, and the
    editable install's finder (a .pth of .venv, processed only for .venv's own interpreter)
    does not, so posttrain is found only where PYTHONPATH (or the working directory) says."""
    import sysconfig

    folder = tmp_path_factory.mktemp("image")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    python = str(folder / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    (Path(site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def bare_env() -> dict[str, str]:
    """What a container's process may hold: a PATH and a home, no PYTHONPATH."""
    import os

    return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")}


@pytest.mark.slow
def test_the_trainer_entrypoint_started_in_a_run_directory_imports_posttrain_from_the_env_given(
    image_python, tmp_path
):
    entry = [image_python, "-m", "posttrain.gpu.train"]  # no RUN_DIR: its usage, exit 2
    alone = subprocess.run(entry, cwd=tmp_path, env=bare_env(), capture_output=True, text=True)
    assert alone.returncode == 1 and "No module named 'posttrain'" in alone.stderr
    given = subprocess.run(
        entry, cwd=tmp_path, env=child_env(bare_env()), capture_output=True, text=True, timeout=120
    )
    assert given.returncode == 2, given.stderr[-2000:]
    assert "usage: python -m posttrain.gpu.train RUN_DIR" in given.stderr


def test_the_trainers_path_puts_posttrains_folder_first_and_keeps_what_was_there():
    env = child_env({"PYTHONPATH": f"/opt/extra:{PACKAGE_ROOT}"})
    assert env["PYTHONPATH"] == f"{PACKAGE_ROOT}:/opt/extra"
    assert Path(PACKAGE_ROOT, "posttrain", "gpu", "train.py").is_file()


def trainers(*lines: str) -> list[str]:
    """A launcher whose trainer does what `lines` say (a real process, in the run directory)."""
    code = "\n".join(["from pathlib import Path", "from posttrain.runs import layout", *lines])
    return [sys.executable, "-c", code]


def results(run_dir: Path) -> list[dict]:
    return [e for e in iter_events(run_dir) if e["type"] == "result"]


def test_a_cancelled_trainer_exits_0_and_its_run_reads_cancelled(tmp_path):
    cancelled = "layout.write_result(Path('.'), 'cancelled', 'cancelled by request after step 3')"
    assert train_data_parallel(tmp_path, 2, trainers(cancelled)) == "cancelled"


def test_trainers_that_exit_0_without_a_result_leave_a_failed_run_saying_so(tmp_path):
    assert train_data_parallel(tmp_path, 4, trainers("pass")) == "failed"
    (result,) = results(tmp_path)
    assert result["status"] == "failed"
    assert result["cause"].startswith(
        "the 4 data-parallel trainer processes ended (accelerate launch exit code 0) without "
        "writing a result"
    )


def test_trainers_asked_to_stop_that_end_without_a_result_leave_a_cancelled_run(tmp_path):
    (tmp_path / CANCEL_REQUEST).write_text("")
    assert train_data_parallel(tmp_path, 2, trainers("raise SystemExit(1)")) == "cancelled"


def test_a_restarted_run_ends_as_its_own_trainers_say_not_as_an_earlier_attempt_did(tmp_path):
    layout_events = tmp_path / "events.jsonl"
    layout_events.write_text(json.dumps({"t": 1.0, "type": "result", "status": "failed"}) + "\n")
    succeeded = "layout.write_result(Path('.'), 'succeeded', None, step=2)"
    assert train_data_parallel(tmp_path, 2, trainers(succeeded)) == "succeeded"
    assert train_data_parallel(tmp_path, 2, trainers("pass")) == "failed"
    assert [r["status"] for r in results(tmp_path)] == ["failed", "succeeded", "failed"]


@pytest.mark.slow
def test_two_trainers_launched_by_accelerate_from_the_run_directory_train_the_run(
    image_python, tmp_path
):
    """The Modal function's own launch, on two CPU processes (gloo): an interpreter that
    finds posttrain only in its working directory (as /root in the image) changes into the
    run directory and starts `accelerate launch --multi_gpu`; rank 0 writes one set of events."""
    traces = {"every": 1, "samples": 8}  # rank 0 traces what its reward scored
    spec = load_spec({**tiny(steps=2, traces=traces), "compute": {"backend": "local"}})
    run_dir = tmp_path / "run-dp-0001"
    run_dir.mkdir()
    (run_dir / SPEC).write_text(spec.to_json())
    write_json_atomic(run_dir / RUN_META, {"run_id": run_dir.name, "backend": "local"})
    function = "\n".join(
        [
            "import contextlib, sys",
            f"sys.path.insert(0, {str(ROOT)!r})",
            "from pathlib import Path",
            "from posttrain.gpu.data_parallel import train_data_parallel",
            f"run_dir = Path({str(run_dir)!r})",
            "with contextlib.chdir(run_dir):",
            "    print(train_data_parallel(run_dir, 2))",
        ]
    )
    env = {**bare_env(), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [image_python, "-c", function], capture_output=True, text=True, env=env, timeout=600
    )
    events = list(iter_events(run_dir))
    assert out.stdout.strip().splitlines()[-1:] == ["succeeded"], (out.stderr[-3000:], events)
    assert [r["status"] for r in results(run_dir)] == ["succeeded"]
    assert [e["step"] for e in events if e["type"] == "metrics"] == [1, 2]  # rank 0's only
    # the spec's batch of 8 is the two processes' together: rank 0 scored 4 a step
    for step in (1, 2):
        traced = (run_dir / "traces" / f"step_{step:04d}.jsonl").read_text().splitlines()
        assert len(traced) == 4
