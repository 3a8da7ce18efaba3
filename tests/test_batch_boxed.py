"""best_of with sandbox=: a box per candidate on its own copy of the workspace, the
score run against each box, the winner's tree kept in the workspace's place and every
copy removed — with Local boxes, and Bubblewrap boxes where they can be had."""

import json
import os

import pytest

from nacelle import Agent, Message, Role, Text, ToolCall, batch
from nacelle.errors import ConfigError
from nacelle.sandbox import Bubblewrap, Local
from nacelle.sandbox.bubblewrap import available
from nacelle.testing import ScriptedBackend
from nacelle.toolsets import LocalTools

pytestmark = pytest.mark.slow  # every candidate runs a command in a box


def assistant(*parts):
    return Message(Role.ASSISTANT, tuple(parts))


def candidate_maker(values):
    made = []

    def make_agent(box):
        value = values[len(made)]
        script = ScriptedBackend([
            assistant(ToolCall("c1", "run_command", json.dumps(
                {"command": f"cat answer.txt > seen.txt; echo {value} > answer.txt"}))),
            assistant(Text(f"wrote {value}")),
        ])
        tools = LocalTools(box.workspace, sandbox=box)
        made.append(box)
        return Agent(script, "sys", tools=tools.tools())

    return make_agent, made


def kinds():
    return [pytest.param(Local, id="local"),
            pytest.param(Bubblewrap, id="bubblewrap", marks=[
                pytest.mark.integration,
                pytest.mark.skipif(available() is not None,
                                   reason=f"no Bubblewrap box: {available()}")])]


@pytest.mark.parametrize("factory", kinds())
def test_each_candidate_works_on_its_own_copy_and_the_winners_tree_is_kept(tmp_path, factory):
    work = tmp_path / "repo"
    work.mkdir()
    (work / "answer.txt").write_text("0\n")
    make_agent, boxes = candidate_maker([3, 7, 5])
    scored = []

    def score(result, box):
        done = box.run(["cat", "answer.txt"])
        scored.append((result.text, done.stdout))
        return int(done.stdout)

    best, results = batch.best_of(make_agent, "write your answer", 3, score=score,
                                  sandbox=factory, workspace=work)
    assert best.text == "wrote 7"
    assert [r.text for r in results] == ["wrote 3", "wrote 7", "wrote 5"]
    assert scored == [("wrote 3", "3"), ("wrote 7", "7"), ("wrote 5", "5")]
    assert len({b.workspace for b in boxes}) == 3 and str(work) not in {b.workspace for b in boxes}
    assert (work / "answer.txt").read_text() == "7\n"
    assert (work / "seen.txt").read_text() == "0\n"  # each began from the original
    assert os.listdir(tmp_path) == ["repo"]  # every copy removed


def test_a_failed_candidate_leaves_the_workspace_as_it_was(tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    (work / "answer.txt").write_text("0\n")

    def make_agent(box):
        return Agent(ScriptedBackend([]), "sys")  # runs out of script: the run fails

    with pytest.raises(AssertionError):
        batch.best_of(make_agent, "go", 2, score=lambda r, b: 0, sandbox=Local, workspace=work)
    assert (work / "answer.txt").read_text() == "0\n"
    assert os.listdir(tmp_path) == ["repo"]


def test_sandbox_needs_an_agent_maker_and_a_workspace(tmp_path):
    agent = Agent(ScriptedBackend([]), "sys")
    with pytest.raises(ConfigError, match="function making each candidate"):
        batch.best_of(agent, "go", 2, score=lambda r, b: 0, sandbox=Local, workspace=tmp_path)
    with pytest.raises(ConfigError, match="workspace="):
        batch.best_of(lambda box: agent, "go", 2, score=lambda r, b: 0, sandbox=Local)
