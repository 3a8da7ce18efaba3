"""Bubblewrap boxes against the real bwrap: what a command in one cannot see, reach,
write or outlive. Host processes and files are checked from the host's /proc and
file system, not assumed. Skipped, saying why, where no box can be had."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

import nacelle
from nacelle.errors import Cancelled, ConfigError
from nacelle.sandbox import Bubblewrap
from nacelle.sandbox.bubblewrap import available
from nacelle.toolsets import LocalTools

WHY = available()
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(WHY is not None, reason=f"no Bubblewrap box here: {WHY}")]
PROJECT = Path(__file__).resolve().parents[2]


def host_processes_with(marker):
    """Pids of host processes whose command line holds ``marker``."""
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
        if not host_processes_with(marker):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def box(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with Bubblewrap(work) as b:
        yield b


def test_a_command_sees_only_the_environment_it_is_given(box, monkeypatch):
    secret = "sk-" + uuid.uuid4().hex
    monkeypatch.setenv("NACELLE_TEST_SECRET", secret)
    # A host process holding the secret in its environment, for /proc/*/environ.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, "HELD": secret})
    try:
        done = box.run(["sh", "-c", "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"],
                       env={"PATH": "/usr/bin:/bin", "GIVEN": "yes"})
    finally:
        holder.kill()
        holder.wait()
    assert done.exit_code == 0
    assert "GIVEN=yes" in done.stdout
    assert secret not in done.stdout + done.stderr
    assert "NACELLE_TEST_SECRET" not in done.stdout


def test_a_command_cannot_see_the_hosts_processes(box):
    marker = "marker-" + uuid.uuid4().hex
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    try:
        # The host sees it (on a loaded machine the new process can take a moment to
        # show its command line in /proc).
        deadline = time.monotonic() + 10
        while holder.pid not in host_processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert holder.pid in host_processes_with(marker)
        done = box.run(["sh", "-c", "cat /proc/*/cmdline | tr '\\0' ' '; echo; ls /proc"])
    finally:
        holder.kill()
        holder.wait()
    assert marker not in done.stdout
    pids = [p for p in done.stdout.split() if p.isdigit()]
    assert len(pids) < 10, pids  # the box's own few, not the host's


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    yield server.getsockname()[1]
    server.close()


CONNECT = textwrap.dedent("""
    import socket, sys
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
    except OSError as err:
        print("refused:", err); sys.exit(3)
    print("connected")
""")


def test_a_command_cannot_reach_the_network_unless_asked(tmp_path, listener):
    with Bubblewrap(tmp_path) as box:
        python = box.python()
        done = box.run([python, "-I", "-c", CONNECT, str(listener)])
    assert done.exit_code == 3, done
    with Bubblewrap(tmp_path, network=True) as box:
        done = box.run([box.python(), "-I", "-c", CONNECT, str(listener)])
    assert (done.exit_code, done.stdout) == (0, "connected"), done


def test_a_command_writes_only_in_the_workspace(tmp_path, box):
    outside = tmp_path / "outside.txt"
    outside.write_text("host")
    targets = ["/usr/escape", "/etc/escape", "/escape", str(outside)]
    script = "echo kept > inside.txt; echo x > /tmp/private; ls /tmp\n" + "".join(
        f"(echo x > {t}) 2>/dev/null || echo refused {t}\n" for t in targets)
    done = box.run(["sh", "-c", script])
    assert (Path(box.workspace) / "inside.txt").read_text() == "kept\n"
    assert outside.read_text() == "host"
    assert not Path("/usr/escape").exists() and not Path("/etc/escape").exists()
    assert [line for line in done.stdout.splitlines() if line.startswith("refused")] == \
        [f"refused {t}" for t in targets], done
    assert not Path("/tmp/private").exists()  # the box's /tmp is its own


def test_a_command_has_no_capabilities_to_remount_the_read_only_tree(box):
    target = f"/usr/nacelle-escape-{uuid.uuid4().hex}"
    done = box.run(["sh", "-c", "grep CapEff /proc/self/status; "
                                f"mount -o remount,rw,bind /usr && touch {target}"])
    escaped = os.path.exists(target)
    if escaped:
        os.unlink(target)
    assert "CapEff:\t0000000000000000" in done.stdout
    assert done.exit_code != 0 and not escaped


def test_a_symlink_in_the_workspace_does_not_lead_out(tmp_path, box):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    done = box.run(["sh", "-c", f"""
        ln -s {secret} link; cat link; echo changed > link
        ln -s / root; cat root/{str(secret).lstrip('/')}; ls root"""])
    assert "host secret" not in done.stdout
    assert secret.read_text() == "host secret"
    # The host's file tools refuse the same link the box made.
    with LocalTools(box.workspace, sandbox=box) as tools:
        read = {t.name: t for t in tools.tools()}["read_file"]
        with pytest.raises(nacelle.NacelleError):
            read.run({"path": "link"}, nacelle.ToolContext(call_id="c", name="read_file"))


def test_a_command_and_its_escapees_end_at_the_timeout(box):
    marker = "31" + str(uuid.uuid4().int % 10**6)
    started = time.monotonic()
    done = box.run(["sh", "-c", f"setsid sleep {marker}1 & (sleep {marker}2 &) ; "
                                f"nohup sleep {marker}3 >/dev/null 2>&1 & sleep {marker}4"],
                   timeout=1)
    assert done.timed_out and done.exit_code < 0
    assert time.monotonic() - started < 15
    assert gone(marker), host_processes_with(marker)


def test_cancel_and_close_kill_a_running_command(box):
    marker = "32" + str(uuid.uuid4().int % 10**6)
    cancel = threading.Event()
    ctx = nacelle.ToolContext(call_id="c", name="run", cancelled=cancel)
    threading.Timer(0.5, cancel.set).start()
    with pytest.raises(Cancelled):
        box.run(["sh", "-c", f"setsid sleep {marker}1 & sleep {marker}2"], ctx=ctx)
    assert gone(marker)
    threading.Timer(0.5, box.close).start()
    with pytest.raises(Cancelled):
        box.run(["sh", "-c", f"(sleep {marker}3 &); sleep {marker}4"])
    assert gone(marker)
    with pytest.raises(ConfigError, match="closed"):
        box.run(["true"])


def test_memory_and_cpu_limits_hold(tmp_path):
    with Bubblewrap(tmp_path, memory_mb=200, cpu_seconds=1) as box:
        python = box.python()
        big = box.run([python, "-I", "-c", "b = bytearray(400 * 1024 * 1024)"])
        assert big.exit_code == 1 and "MemoryError" in big.stderr
        spin = box.run([python, "-I", "-c", "while True: pass"], timeout=30)
    # SIGXCPU at the limit, or SIGKILL: bwrap reports a signal N as 128 + N, as a shell does.
    assert not spin.timed_out and spin.exit_code in (128 + 24, 128 + 9), spin


def test_run_command_runs_in_the_box(box, monkeypatch):
    monkeypatch.setenv("NACELLE_TEST_SECRET", "sk-in-the-host")
    with LocalTools(box.workspace, sandbox=box) as tools:
        run = {t.name: t for t in tools.tools()}["run_command"]
        out = run.run({"command": "env; pwd; echo hi > made.txt"},
                      nacelle.ToolContext(call_id="c", name="run_command"))
        assert "exit code: 0" in out and "/workspace" in out
        assert "sk-in-the-host" not in out
        assert (Path(box.workspace) / "made.txt").read_text() == "hi\n"
        assert "isolated box" in run.description
    with pytest.raises(ConfigError, match="same tree"):
        LocalTools(Path(box.workspace).parent, sandbox=box)


@pytest.mark.skipif(os.geteuid() != 0, reason="refusing max_pids is for a root host")
def test_max_pids_is_refused_for_a_root_host(tmp_path):
    with pytest.raises(ConfigError, match="RLIMIT_NPROC"):
        Bubblewrap(tmp_path, max_pids=10)


AS_USER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[2])
    from nacelle.sandbox import Bubblewrap
    box = Bubblewrap(sys.argv[1], max_pids=30)
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 2; echo survived"
    started = time.monotonic()
    done = box.run(["sh", "-c", bomb], timeout=20)
    print("bomb", done.exit_code, done.timed_out, round(time.monotonic() - started, 1))
    print("resource" in done.stderr.lower() or "fork" in done.stderr.lower())
    print(box.run(["sh", "-c", "id -u; echo ok > w.txt; cat w.txt"]).stdout.replace("\\n", " "))
""")


def test_an_ordinary_user_gets_the_box_and_a_fork_bomb_is_contained():
    """Run as nobody through setpriv when the tests run as root, so the user-namespace
    path (no privileges at all) is the one exercised."""
    work = tempfile.mkdtemp(prefix="nacelle-box-")  # pytest's own tmp is root's alone
    argv = [sys.executable, "-I", "-c", AS_USER, work, str(PROJECT)]
    if os.geteuid() == 0:
        # The distribution's interpreter: one nobody can run (a root-owned pyenv under
        # /root may not be).
        if shutil.which("setpriv") is None or not os.path.exists("/usr/bin/python3"):
            shutil.rmtree(work)
            pytest.skip("needs setpriv (util-linux) and /usr/bin/python3 to run as nobody")
        os.chmod(work, 0o777)
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                "/usr/bin/python3", *argv[1:]]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin"}, cwd="/")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("bomb ") and lines[0].split()[2] == "False", lines
    assert lines[1] == "True", done.stdout
    assert lines[2].split() == [str(65534 if os.geteuid() == 0 else os.geteuid()), "ok"]
