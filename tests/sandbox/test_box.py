"""The Sandbox protocol and the Local box: run_command's supervisor behind run(),
with its arguments checked and everything reaped at the timeout, cancel and close."""

import os
import threading
import time
import uuid

import pytest

import nacelle
from nacelle.errors import Cancelled, ConfigError
from nacelle.sandbox import Completed, Local, Sandbox
from nacelle.toolsets import LocalTools

pytestmark = [pytest.mark.slow,  # every test starts processes
              pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")]


def alive_with(marker):
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                line = f.read()
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in line and state not in ("Z", "X"):
            found.append(int(name))
    return found


def gone(marker, within=5.0):
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not alive_with(marker):
            return True
        time.sleep(0.05)
    return False


def test_a_local_box_runs_a_command_in_its_workspace_with_only_the_given_environment(
        tmp_path, monkeypatch):
    monkeypatch.setenv("NACELLE_TEST_SECRET", "sk-host")
    (tmp_path / "sub").mkdir()
    with Local(tmp_path) as box:
        assert isinstance(box, Sandbox)
        assert box.workspace == os.path.realpath(tmp_path)
        done = box.run(["sh", "-c", "pwd; env; cat"], cwd="sub", stdin="fed\n",
                       env={"PATH": "/usr/bin:/bin", "ONLY": "this"})
    assert isinstance(done, Completed)
    lines = done.stdout.splitlines()
    assert lines[0] == os.path.join(os.path.realpath(tmp_path), "sub")
    assert "ONLY=this" in lines and "fed" in lines
    assert "sk-host" not in done.stdout
    assert (done.exit_code, done.timed_out) == (0, False)


def test_exit_codes_and_stderr_come_back(tmp_path):
    with Local(tmp_path) as box:
        done = box.run(["sh", "-c", "echo oops >&2; exit 7"])
    assert (done.exit_code, done.stderr, done.stdout) == (7, "oops", "")


def test_a_timeout_kills_the_command_and_its_survivors(tmp_path):
    marker = "41" + str(uuid.uuid4().int % 10**6)
    with Local(tmp_path) as box:
        done = box.run(["sh", "-c", f"setsid sleep {marker}1 & (sleep {marker}2 &); "
                                    f"sleep {marker}3"], timeout=0.5)
    assert done.timed_out
    assert gone(marker), alive_with(marker)


def test_cancel_and_close_kill_the_command(tmp_path):
    marker = "42" + str(uuid.uuid4().int % 10**6)
    cancel = threading.Event()
    ctx = nacelle.ToolContext(call_id="c", name="run", cancelled=cancel)
    with Local(tmp_path) as box:
        threading.Timer(0.3, cancel.set).start()
        with pytest.raises(Cancelled):
            box.run(["sh", "-c", f"sleep {marker}1"], ctx=ctx)
        threading.Timer(0.3, box.close).start()
        with pytest.raises(Cancelled):
            box.run(["sh", "-c", f"(setsid sleep {marker}2 &); sleep {marker}3"])
    assert gone(marker), alive_with(marker)


@pytest.mark.parametrize("argv, kwargs, match", [
    ("ls -l", {}, "list of strings"),
    ([], {}, "list of strings"),
    (["echo", "a\0b"], {}, "NUL"),
    (["true"], {"cwd": "../up"}, "inside the workspace"),
    (["true"], {"cwd": "/etc"}, "inside the workspace"),
    (["true"], {"env": {"A=B": "c"}}, "names"),
    (["true"], {"timeout": 0}, "positive"),
    (["true"], {"stdin": 3}, "bytes or text"),
])
def test_bad_arguments_are_config_errors(tmp_path, argv, kwargs, match):
    with Local(tmp_path) as box, pytest.raises(ConfigError, match=match):
        box.run(argv, **kwargs)


def test_a_missing_workspace_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not a directory"):
        Local(tmp_path / "missing")


def test_local_tools_run_commands_in_the_given_box(tmp_path):
    with Local(tmp_path) as box, LocalTools(tmp_path, sandbox=box) as tools:
        assert "sandbox=Local(" in repr(tools)
        run = {t.name: t for t in tools.tools()}["run_command"]
        out = run.run({"command": "echo hi; exit 3"},
                      nacelle.ToolContext(call_id="c", name="run_command"))
    assert out == "exit code: 3\nstdout:\nhi"


def test_a_box_pickles_without_its_running_state(tmp_path):
    import pickle

    with Local(tmp_path) as box:
        copy = pickle.loads(pickle.dumps(box))
        assert copy.workspace == box.workspace
        assert copy.run(["true"]).exit_code == 0
