"""Container boxes through the engine's CLI: run where podman or docker can run
containers, skipped with the engine's own reason elsewhere (a CLI without a daemon)."""

import os

import pytest

from nacelle.errors import ConfigError
from nacelle.sandbox import Container
from nacelle.sandbox.container import engine_problem

IMAGE = os.environ.get("NACELLE_SANDBOX_IMAGE", "docker.io/library/python:3.12-slim")


def engine():
    problems = []
    for name in ("podman", "docker"):
        problem = engine_problem(name)
        if problem is None:
            return name, None
        problems.append(problem)
    return None, "; ".join(problems)


ENGINE, WHY = engine()


def test_an_engine_that_cannot_run_containers_is_a_config_error_saying_why(tmp_path):
    for name in ("podman", "docker"):
        if name != ENGINE:
            with pytest.raises(ConfigError, match=name):
                Container(IMAGE, tmp_path, engine=name)
    with pytest.raises(ConfigError, match="engine must be one of"):
        Container(IMAGE, tmp_path, engine="lxc")
    with pytest.raises(ConfigError, match="image"):
        Container("--privileged", tmp_path)


@pytest.mark.integration
@pytest.mark.skipif(ENGINE is None, reason=f"no container engine runs here: {WHY}")
def test_a_command_runs_in_a_container_with_only_the_workspace_writable(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("NACELLE_TEST_SECRET", "sk-host")
    with Container(IMAGE, tmp_path, engine=ENGINE) as box:
        done = box.run(["sh", "-c", "env; pwd; echo hi > made.txt; echo x > /etc/x"],
                       env={"PATH": "/usr/local/bin:/usr/bin:/bin", "GIVEN": "yes"})
        late = box.run(["sh", "-c", "sleep 100"], timeout=2)
    assert "GIVEN=yes" in done.stdout and "sk-host" not in done.stdout
    assert "/workspace" in done.stdout and "Read-only" in done.stderr
    assert (tmp_path / "made.txt").read_text() == "hi\n"
    assert late.timed_out
