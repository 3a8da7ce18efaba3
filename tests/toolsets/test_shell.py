"""run_command against real processes: environment, process groups, timeouts,
cancellation and output caps. Pids are checked in /proc, not assumed."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import nacelle
from nacelle.errors import Cancelled
from nacelle.toolsets import LocalTools
from nacelle.toolsets.shell import CommandTimedOut, SupervisorLost

pytestmark = [pytest.mark.slow,  # every test starts shell processes
              pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")]

PROJECT = Path(__file__).resolve().parents[2]


def ctx(**kwargs):
    return nacelle.ToolContext(call_id="call_1", name="run_command", **kwargs)


@pytest.fixture
def make(tmp_path):
    made = []

    def make_tool(**kwargs):
        tools = LocalTools(tmp_path, allow_bash=True, **kwargs)
        made.append(tools)
        return tools.tools()[-1]

    yield make_tool
    for tools in made:
        tools.close()


def gone(pid, within=5.0):
    """True once ``pid`` has exited (a zombie awaiting its reaper counts as exited)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def read_pids(path, count, within=5.0):
    end = time.monotonic() + within
    while time.monotonic() < end:
        if path.exists():
            pids = [int(p) for p in path.read_text().split()]
            if len(pids) >= count:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"{path} never listed {count} pids")


def test_run_command_reports_exit_code_stdout_and_stderr(make):
    result = make().run({"command": "echo out; echo err >&2; exit 3"}, ctx())
    assert result == "exit code: 3\nstdout:\nout\nstderr:\nerr"


def test_run_command_without_output_says_so(make):
    assert make().run({"command": "true"}, ctx()) == "exit code: 0 (no output)"


def test_run_command_reports_a_signal_death(make):
    assert make().run({"command": "kill -9 $$"}, ctx()) == "killed by signal SIGKILL (no output)"


def test_run_command_runs_in_the_root(make, tmp_path):
    assert make().run({"command": "pwd -P"}, ctx()) == (
        f"exit code: 0\nstdout:\n{os.path.realpath(tmp_path)}")


def test_run_command_environment_holds_only_path_and_home(make, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    # /proc/$$/environ is exactly what the shell was started with, before it adds PWD.
    result = make().run({"command": "tr '\\0' '\\n' < /proc/$$/environ | sort"}, ctx())
    assert result == "exit code: 0\nstdout:\nHOME=/home/someone\nPATH=/usr/bin:/bin"
    assert "sk-ant" not in make().run({"command": "env"}, ctx())


def test_run_command_gives_the_command_no_standard_input(make):
    started = time.monotonic()
    assert make().run({"command": "cat; echo done"}, ctx()) == "exit code: 0\nstdout:\ndone"
    assert time.monotonic() - started < 5


def test_run_command_timeout_kills_the_whole_process_group(make, tmp_path):
    tool = make(command_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(CommandTimedOut, match=r"^the command timed out after 1\.\d seconds; "
                                              r"it and every process it started were killed"):
        tool.run({"command": "echo started; sleep 100 & echo $! > pids; "
                             "sleep 100 & echo $! >> pids; wait"}, ctx())
    assert time.monotonic() - started < 10
    pids = read_pids(tmp_path / "pids", 2)
    assert all(gone(pid) for pid in pids), pids


def test_run_command_timeout_message_carries_the_output_so_far(make):
    with pytest.raises(CommandTimedOut, match=r"Output before it was stopped:\n.*\nstdout:\n"
                                              r"started$"):
        make(command_timeout=0.5).run({"command": "echo started; sleep 100"}, ctx())


def test_run_command_kills_a_group_member_that_ignores_sigterm(make, tmp_path):
    command = "trap '' TERM; sh -c 'trap \"\" TERM; sleep 100' & echo $! > pids; wait"
    with pytest.raises(CommandTimedOut):
        make(command_timeout=0.5).run({"command": command}, ctx())
    assert gone(read_pids(tmp_path / "pids", 1)[0])


def test_run_command_honours_the_call_deadline(make):
    started = time.monotonic()
    with pytest.raises(CommandTimedOut):
        make(command_timeout=60).run({"command": "sleep 100"},
                                     ctx(deadline=time.monotonic() + 0.5))
    assert time.monotonic() - started < 10


def test_run_command_cancellation_kills_the_group_promptly(make, tmp_path):
    cancelled = threading.Event()
    timer = threading.Timer(0.3, cancelled.set)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(Cancelled, match="the command was cancelled after"):
            make().run({"command": "sleep 100 & echo $! > pids; sleep 100"},
                       ctx(cancelled=cancelled))
    finally:
        timer.cancel()
    assert time.monotonic() - started < 10
    assert gone(read_pids(tmp_path / "pids", 1)[0])


def test_background_jobs_are_stopped_when_the_command_finishes(make, tmp_path):
    started = time.monotonic()
    result = make().run({"command": "sleep 100 & echo $! > pid; echo done"}, ctx())
    assert result == "exit code: 0\nstdout:\ndone"
    assert time.monotonic() - started < 10
    assert gone(int((tmp_path / "pid").read_text()))


def test_a_megabyte_of_output_is_capped_and_the_cut_announced(make):
    result = make().run({"command": "head -c 1000000 /dev/zero | tr '\\0' x"}, ctx())
    assert len(result) < 30_000
    head, tail = result.split("\n[... 970200 bytes omitted: output over the "
                              "30000-character limit ...]\n")
    assert head == "exit code: 0\nstdout:\n" + "x" * 14900
    assert tail == "x" * 14900


def test_both_streams_are_capped_when_both_are_long(make):
    result = make(max_output=2000).run(
        {"command": "head -c 50000 /dev/zero | tr '\\0' o; head -c 50000 /dev/zero | "
                    "tr '\\0' e >&2"}, ctx())
    assert len(result) < 2300
    assert result.count("bytes omitted: output over the 2000-character limit") == 2
    assert "stdout:\nooo" in result and "stderr:\neee" in result


def test_short_stdout_leaves_the_budget_to_stderr(make):
    result = make(max_output=1000).run(
        {"command": "echo ok; head -c 700 /dev/zero | tr '\\0' e >&2"}, ctx())
    assert result == "exit code: 0\nstdout:\nok\nstderr:\n" + "e" * 700


@pytest.mark.parametrize("command, message", [
    ("", "command must be a non-empty string"),
    ("   ", "command must be a non-empty string"),
    (None, "command must be a non-empty string"),
    ("echo \0", "command contains a NUL character"),
])
def test_run_command_refuses_bad_commands(make, command, message):
    with pytest.raises(ValueError, match=message):
        make().run({"command": command}, ctx())


def test_run_command_schema_takes_only_the_command(make):
    tool = make()
    assert tool.schema == {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The shell command to run."}},
        "required": ["command"],
        "additionalProperties": False,
    }
    assert tool.exclusive is True and tool.read_only is False


# -- processes that leave the group, quick exits, the ancestors' environments -----------

LEAVES_THE_SESSION = (f"{sys.executable} -c 'import os, time; os.setsid(); time.sleep(60)' & "
                      "echo $! > pids; ")
# ``setsid`` puts a shell in a new session; its ``sleep`` is orphaned when that shell exits.
ORPHANED_IN_A_NEW_SESSION = "setsid sh -c 'sleep 60 & echo $! >> pids'; "


def test_a_child_that_calls_setsid_still_dies_at_the_timeout(make, tmp_path):
    command = LEAVES_THE_SESSION + ORPHANED_IN_A_NEW_SESSION + "sleep 100"
    with pytest.raises(CommandTimedOut):
        make(command_timeout=1.5).run({"command": command}, ctx())
    pids = read_pids(tmp_path / "pids", 2)
    assert all(gone(pid) for pid in pids), pids


def test_a_child_that_calls_setsid_still_dies_on_cancel(make, tmp_path):
    cancelled = threading.Event()
    timer = threading.Timer(1.5, cancelled.set)
    timer.start()
    try:
        with pytest.raises(Cancelled):
            make().run({"command": LEAVES_THE_SESSION + ORPHANED_IN_A_NEW_SESSION + "sleep 100"},
                       ctx(cancelled=cancelled))
    finally:
        timer.cancel()
    pids = read_pids(tmp_path / "pids", 2)
    assert all(gone(pid) for pid in pids), pids


def test_a_child_that_calls_setsid_is_stopped_when_the_command_finishes(make, tmp_path):
    command = (LEAVES_THE_SESSION + ORPHANED_IN_A_NEW_SESSION +
               "while [ $(wc -l < pids) -lt 2 ]; do sleep 0.05; done; echo done")
    assert make().run({"command": command}, ctx()) == "exit code: 0\nstdout:\ndone"
    pids = read_pids(tmp_path / "pids", 2)
    assert all(gone(pid) for pid in pids), pids


@pytest.mark.parametrize("command", [
    "true", "echo hi", "exec >/dev/null 2>&1; true", "exec >&- 2>&-", "echo oops >&2; exit 3",
])
def test_a_command_that_exits_at_once_is_never_reported_as_timed_out(make, command):
    tool = make(command_timeout=0.05)
    for _ in range(40):
        result = tool.run({"command": command}, ctx())
        assert result.startswith("exit code: "), result


WALK_THE_ANCESTORS = (
    "p=$$; while [ \"$p\" -gt 1 ]; do echo \"pid $p\"; tr '\\0' '\\n' < /proc/$p/environ; "
    "p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status); done; echo end")

SECRET_HOLDING_HOST = """
import os, sys
import nacelle
from nacelle.toolsets import LocalTools
with open(f"/proc/{os.getpid()}/environ", "rb") as f:
    assert b"sk-ant-test-secret" in f.read()  # else the test proves nothing
with LocalTools(sys.argv[1], allow_bash=True) as tools:
    sys.stdout.write(tools.tools()[-1].run({"command": sys.argv[2]}, nacelle.ToolContext()))
"""


def test_the_command_cannot_read_the_hosts_secrets_from_its_ancestors(tmp_path):
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-secret"}
    result = subprocess.run(
        [sys.executable, "-c", SECRET_HOLDING_HOST, str(tmp_path), WALK_THE_ANCESTORS],
        cwd=str(PROJECT), env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    walked = result.stdout
    assert walked.startswith("exit code: 0\nstdout:\npid ") and walked.endswith("\nend"), walked
    assert walked.count("pid ") >= 2  # the shell and at least its parent
    assert "sk-ant-test-secret" not in walked
    assert "ANTHROPIC_API_KEY" not in walked


def test_a_command_that_kills_its_supervisor_is_reported_as_lost(make):
    with pytest.raises(SupervisorLost, match=r"^the process supervising the command ended "
                                             r"or stopped answering .*\nexit code unknown"):
        make().run({"command": "echo before; kill -9 $PPID"}, ctx())
