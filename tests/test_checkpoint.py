"""Approvals that pause: PAUSE, Checkpoint, Agent.resume, in this process and another."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import nacelle
from nacelle import Checkpoint, CheckpointError, ConfigError, Kind, Stop
from nacelle.checkpoint import Resume, fingerprint
from nacelle.loop import RunSettings, run
from nacelle.messages import ToolCall, ToolResult
from nacelle.testing import ScriptedBackend, Turn

sys.path.insert(0, str(Path(__file__).parent))
import checkpoint_agent as helper  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHILD = ("import sys; sys.path[:0] = ['tests', '.']; import checkpoint_agent; "
         "checkpoint_agent.resume_main()")


@pytest.fixture
def effects(tmp_path, monkeypatch):
    path = tmp_path / "effects.txt"
    path.write_text("")
    monkeypatch.setenv("NACELLE_SIDE_EFFECTS", str(path))
    return path


def lines(path):
    return [line.split(" ", 1) for line in path.read_text().splitlines()]


def paused_run():
    events = list(helper.agent([helper.first_turn()]).stream([nacelle.user_text("go")]))
    return events, events[-1]


def resume_in_child(text, decisions):
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(decisions)], input=text,
                         capture_output=True, text=True, cwd=str(ROOT), env=os.environ,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_paused_round_runs_the_approved_calls_and_ends_with_a_checkpoint(effects):
    events, done = paused_run()
    results = sorted((e.tool for e in events if e.kind is Kind.TOOL_RESULT), key=lambda t: t.id)
    assert [(t.id, t.paused) for t in results] == [("c1", False), ("c2", True), ("c3", True)]
    assert done.stop is Stop.PAUSED and Stop.PAUSED.value == "paused"
    cp = done.checkpoint
    assert isinstance(cp, Checkpoint)
    assert [r.id for r in cp.results] == ["c1"]
    assert [p.id for p in cp.pending] == ["c2", "c3"]
    assert cp.pending[0].fingerprint == fingerprint("send", {"body": "hi", "to": "ann"})
    assert cp.iterations == 1 and cp.tool_calls == 3 and cp.tools == ("lookup", "send")
    assert cp.usage.total == 15
    assert [line[1] for line in lines(effects)] == ["lookup weather"]
    # DONE's conversation answers every call, so it can be sent on as it is.
    assert [p.failed for p in done.messages[-1].parts] == [False, True, True]
    assert "checkpoint=<Checkpoint" in repr(done)


@pytest.mark.slow
def test_pause_then_resume_in_another_process_runs_each_tool_exactly_once(effects):
    _, done = paused_run()
    text = done.checkpoint.dumps(key=helper.KEY)
    assert json.loads(text)["version"] == 2 and "signature" in json.loads(text)
    seen = resume_in_child(text, {"c2": {"to": "ann", "body": "hello"},
                                  "c3": "bob asked not to be messaged"})
    ran = lines(effects)
    assert [line[1] for line in ran] == ["lookup weather", "send ann hello"]
    assert ran[0][0] == str(os.getpid()) and ran[1][0] != str(os.getpid())
    assert seen["stop"] == "end" and seen["text"] == "All done."
    # The model saw the first round's result, the edited call as what ran, the reason.
    assert seen["results"] == [["c1", "found weather", False], ["c2", "sent to ann", False],
                               ["c3", "bob asked not to be messaged", True]]
    assert seen["calls"][1] == ["c2", '{"to": "ann", "body": "hello"}']
    announced = [e[1] for e in seen["events"] if e[0] == "tool_call"]
    closed = sorted(e[1] for e in seen["events"] if e[0] == "tool_result")
    assert announced == ["c2", "c3"] and closed == ["c2", "c3"]
    assert seen["total"] == 15 + 22  # usage continues from the checkpoint


@pytest.mark.slow
def test_resume_with_approve_and_deny_in_another_process(effects):
    _, done = paused_run()
    seen = resume_in_child(done.checkpoint.dumps(key=helper.KEY), {"c2": True, "c3": False})
    assert [line[1] for line in lines(effects)] == ["lookup weather", "send ann hi"]
    assert seen["results"][1] == ["c2", "sent to ann", False]
    assert seen["results"][2][0] == "c3" and seen["results"][2][2] is True
    assert "did not approve" in seen["results"][2][1]


def tampered(text, change):
    body = json.loads(text)
    change(body)
    return json.dumps(body)


def change_input(body):
    body["messages"][-1]["parts"][2]["input"] = '{"to": "eve", "body": "hi"}'


def change_target(body):
    body["pending"][0]["id"] = "c1"


@pytest.mark.parametrize("change", [change_input, change_target,
                                    lambda body: body.pop("signature"),
                                    lambda body: body.update(iterations=0)])
def test_a_tampered_signed_checkpoint_is_refused(effects, change):
    _, done = paused_run()
    text = tampered(done.checkpoint.dumps(key=helper.KEY), change)
    with pytest.raises(CheckpointError):
        Checkpoint.loads(text, key=helper.KEY)


@pytest.mark.parametrize("change", [change_input, change_target])
def test_an_unsigned_checkpoint_whose_calls_were_changed_is_refused(effects, change):
    _, done = paused_run()
    with pytest.raises(CheckpointError):
        Checkpoint.loads(tampered(done.checkpoint.dumps(), change))


def test_a_wrong_key_an_unknown_version_and_malformed_text_are_refused(effects):
    _, done = paused_run()
    signed = done.checkpoint.dumps(key=helper.KEY)
    with pytest.raises(CheckpointError, match="signature"):
        Checkpoint.loads(signed, key="another key")
    with pytest.raises(CheckpointError, match="signature"):
        Checkpoint.loads(tampered(signed, lambda b: b.update(signature="é")), key=helper.KEY)
    with pytest.raises(CheckpointError, match="fingerprint"):
        Checkpoint.loads(tampered(signed, lambda b: b["pending"][0].update(fingerprint="é")))
    with pytest.raises(CheckpointError, match="version"):
        Checkpoint.loads(tampered(signed, lambda b: b.update(version=3)))
    with pytest.raises(CheckpointError, match="JSON"):
        Checkpoint.loads("{not json")
    with pytest.raises(CheckpointError, match="malformed"):
        Checkpoint.loads(tampered(signed, lambda b: b.pop("usage")))
    assert isinstance(CheckpointError("x"), nacelle.NacelleError)


def test_a_checkpoint_nested_five_thousand_deep_is_a_checkpoint_error():
    deep = '{"version": 1, "messages": ' + "[" * 5000 + "]" * 5000 + "}"
    with pytest.raises(CheckpointError, match="nested deeper than 160 levels"):
        Checkpoint.loads(deep)
    with pytest.raises(CheckpointError, match="nested deeper than 160 levels"):
        Checkpoint.loads(deep.encode("utf-8"))


def test_a_checkpoint_round_trips_losslessly_with_provider_state(effects):
    turn = Turn(nacelle.Message(nacelle.Role.ASSISTANT, (
        nacelle.Reasoning("thinking", state="sig-123", protocol="anthropic"),
        nacelle.ProviderBlock("anthropic", '{"type": "server_tool_use"}'),
        ToolCall("c2", "send", '{"to": "ann", "body": "hi"}'))))
    done = list(helper.agent([turn]).stream([nacelle.user_text("go")]))[-1]
    back = Checkpoint.loads(done.checkpoint.dumps(key=b"k"), key=b"k")
    assert back == done.checkpoint


def test_decisions_must_name_every_pending_call_and_nothing_else(effects):
    _, done = paused_run()
    resumer = helper.agent(["ok"])
    with pytest.raises(ConfigError, match="not pending"):
        resumer.resume(done.checkpoint, {"c2": True, "c3": True, "c9": True})
    with pytest.raises(ConfigError, match="not pending"):
        resumer.resume(done.checkpoint, {"c1": True, "c2": True, "c3": True})
    with pytest.raises(ConfigError, match="no decision"):
        resumer.resume(done.checkpoint, {"c2": True})
    with pytest.raises(ConfigError, match="invalid"):
        resumer.resume(done.checkpoint, {"c2": {"to": 3}, "c3": True})
    with pytest.raises(ConfigError):
        resumer.resume(done.checkpoint, {"c2": 1, "c3": True})


def test_an_agent_lacking_the_checkpoints_tools_refuses_to_resume(effects):
    _, done = paused_run()
    lacking = nacelle.Agent(ScriptedBackend(["ok"]), "You help.", tools=[helper.lookup])
    with pytest.raises(CheckpointError, match="send"):
        lacking.resume(done.checkpoint, {"c2": True, "c3": True})


def test_before_hooks_of_a_paused_call_are_not_asked_again_on_resume(effects):
    asked = []

    def before(event):
        asked.append(event.tool)
        return nacelle.HookResult(inject="checked by policy")

    hooks = {nacelle.HookPoint.BEFORE_TOOL_CALL: [before]}
    done = helper.agent([helper.first_turn()], hooks=hooks).run([nacelle.user_text("go")])
    assert done.stop is Stop.PAUSED and sorted(asked) == ["lookup", "send", "send"]
    assert done.checkpoint.pending[0].inject == ("checked by policy",)
    backend = ScriptedBackend(["ok"])
    resumer = nacelle.Agent(backend, "You help.", tools=[helper.lookup, helper.send],
                            hooks=hooks)
    result = resumer.resume_run(Checkpoint.loads(done.checkpoint.dumps()),
                                {"c2": True, "c3": False})
    assert result.stop is Stop.END and len(asked) == 3
    sent = backend.requests[0].messages[-1].parts[1]
    assert sent == ToolResult("c2", "send", "sent to ann\n\nchecked by policy")


def test_iterations_and_budgets_continue_from_the_checkpoint(effects):
    _, done = paused_run()
    capped = helper.agent([helper.first_turn()], max_iterations=2)
    result = capped.resume_run(done.checkpoint, {"c2": True, "c3": True})
    # The resumed run's first turn is the paused run's second: the cap stops it there.
    assert result.stop is Stop.ITERATIONS and result.turns == 1
    assert result.usage.total == 30
    # The lookup ran before the pause; the two approved sends run side by side on
    # the resumed round, so they may finish in either order, each exactly once.
    ran = [line[1] for line in lines(effects)]
    assert ran[0] == "lookup weather" and sorted(ran[1:]) == ["send ann hi", "send bob yo"]


def test_the_loop_guard_counts_calls_across_a_pause(effects):
    """lookup(weather) ran once before the pause; with a guard of 2, asking for it
    again after the resume is the second identical call, so it is refused."""
    events = list(helper.agent([helper.first_turn()], loop_guard=2).stream(
        [nacelle.user_text("go")]))
    text = events[-1].checkpoint.dumps(key=helper.KEY)
    checkpoint = Checkpoint.loads(text, key=helper.KEY)
    assert dict(checkpoint.repeats) == {fingerprint("lookup", '{"query": "weather"}'): 1,
                                        fingerprint("send", '{"to": "ann", "body": "hi"}'): 1,
                                        fingerprint("send", '{"to": "bob", "body": "yo"}'): 1}
    again = Turn(nacelle.Message(nacelle.Role.ASSISTANT, (
        ToolCall("c4", "lookup", '{"query":"weather"}'),)))
    result = helper.agent([again, "ok"], loop_guard=2).resume_run(
        checkpoint, {"c2": True, "c3": False})
    assert result.stop is Stop.END
    (refused,) = result.messages[-2].parts
    assert refused.failed and "call 2 of lookup" in refused.result
    assert [line[1] for line in lines(effects)] == ["lookup weather", "send ann hi"]


def test_a_checkpoint_without_repeats_resumes_with_the_counts_at_zero(effects):
    _, done = paused_run()
    body = json.loads(done.checkpoint.dumps())
    del body["repeats"]
    checkpoint = Checkpoint.loads(json.dumps(body))
    assert checkpoint.repeats == ()
    body["repeats"] = {"abc": -1}
    with pytest.raises(CheckpointError, match="non-negative"):
        Checkpoint.loads(json.dumps(body))


def test_approve_may_refuse_with_a_reason_the_model_reads():
    agent = nacelle.Agent(ScriptedBackend([helper.first_turn(), "ok"]), "You help.",
                          tools=[helper.lookup, helper.send],
                          approve=lambda name, input, ctx: "lookups are off today")
    result = agent.run([nacelle.user_text("go")])
    refused = result.messages[2].parts
    assert all(p.failed and p.result == "lookups are off today" for p in refused)
    assert result.checkpoint is None and result.stop is Stop.END


def test_a_cancel_during_the_resumed_round_closes_its_calls_and_raises(effects):
    started, release = threading.Event(), threading.Event()

    @nacelle.tool
    def send(to: str, body: str, ctx: nacelle.ToolContext) -> str:
        """Send slowly.

        Args:
            to: Who.
            body: What.
        """
        started.set()
        ctx.cancelled.wait(10)
        release.set()
        return "late"

    _, done = paused_run()
    cancel = threading.Event()
    resumer = nacelle.Agent(ScriptedBackend(["never asked"]), "You help.",
                            tools=[helper.lookup, send])
    events = []
    threading.Thread(target=lambda: started.wait(5) and cancel.set(), daemon=True).start()
    with pytest.raises(nacelle.Cancelled):
        for event in resumer.resume(done.checkpoint, {"c2": True, "c3": "no"}, cancel=cancel):
            events.append(event)
    assert started.is_set()
    calls = [e.tool.id for e in events if e.kind is Kind.TOOL_CALL]
    closed = sorted(e.tool.id for e in events if e.kind is Kind.TOOL_RESULT)
    assert calls == ["c2", "c3"] and closed == ["c2", "c3"]
    assert release.wait(5)  # the running call was told to stop
    # The checkpoint is a value: it can be resumed again, with other decisions.
    again = helper.agent(["ok"]).resume_run(done.checkpoint, {"c2": False, "c3": False})
    assert again.stop is Stop.END
    assert [line[1] for line in lines(effects)] == ["lookup weather"]


@pytest.mark.parametrize("key", ["", b"", bytearray()])
def test_an_empty_key_is_refused_when_signing_and_when_verifying(effects, key):
    _, done = paused_run()
    with pytest.raises(ConfigError, match="empty"):
        done.checkpoint.dumps(key=key)
    signed = done.checkpoint.dumps(key=helper.KEY)
    with pytest.raises(ConfigError, match="empty"):
        Checkpoint.loads(signed, key=key)


def test_a_key_that_is_neither_str_nor_bytes_is_refused(effects):
    _, done = paused_run()
    for key in (3, ["k"], True):
        with pytest.raises(ConfigError, match="key"):
            done.checkpoint.dumps(key=key)


def test_pause_is_falsy_has_a_readable_repr_and_pickles_as_itself():
    import pickle

    assert repr(nacelle.PAUSE) == "nacelle.PAUSE" and not nacelle.PAUSE
    assert pickle.loads(pickle.dumps(nacelle.PAUSE)) is nacelle.PAUSE


@nacelle.tool
def shell(command: str) -> str:
    """Run a command.

    Args:
        command: The command line.
    """
    ran.append(command)
    return f"ran {command}"


ran = []


def no_rm_rf(event):
    if "rm -rf" in event.input:
        return nacelle.HookResult(deny="refused by policy: no rm -rf")
    return nacelle.HookResult(inject=f"checked {json.loads(event.input)['command']}")


def paused_shell(command, *, hooks=None, loop_guard=3):
    """A run whose one call, shell(command), paused for approval, and an Agent to
    resume it that answers "ok"."""
    asks = Turn(nacelle.Message(nacelle.Role.ASSISTANT, (
        ToolCall("s1", "shell", json.dumps({"command": command})),)))
    hooks = hooks or {nacelle.HookPoint.BEFORE_TOOL_CALL: [no_rm_rf]}
    options = dict(tools=[shell], hooks=hooks, loop_guard=loop_guard)
    approved = []

    def approve(name, input, ctx):
        approved.append(input)
        return nacelle.PAUSE

    done = nacelle.Agent(ScriptedBackend([asks]), "You help.", approve=approve,
                         **options).run([nacelle.user_text("list the files")])
    assert done.stop is Stop.PAUSED
    backend = ScriptedBackend(["ok", "ok"])
    resumer = nacelle.Agent(backend, "You help.", approve=approve, **options)
    return Checkpoint.loads(done.checkpoint.dumps(key=b"k"), key=b"k"), resumer, approved


def test_an_edited_input_passes_the_before_hooks_again_and_a_deny_keeps_the_tool_from_running():
    ran.clear()
    checkpoint, resumer, approved = paused_shell("ls -la")
    assert checkpoint.pending[0].inject == ("checked ls -la",)
    events = list(resumer.resume(checkpoint, {"s1": {"command": "rm -rf /"}}))
    (result,) = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert ran == [] and result.error == "refused by policy: no rm -rf"
    assert [e.tool.input for e in events if e.kind is Kind.TOOL_CALL] == [
        '{"command": "rm -rf /"}']
    # The person's decision is the approval of the edited call: approve is not asked again.
    assert len(approved) == 1
    sent = events[-1].messages[-2].parts[0]
    assert sent.failed and sent.result == "refused by policy: no rm -rf"


def test_an_edited_input_that_a_hook_allows_runs_with_that_hooks_inject_not_the_old_one():
    ran.clear()
    checkpoint, resumer, approved = paused_shell("ls -la")
    result = resumer.resume_run(checkpoint, {"s1": {"command": "ls"}})
    assert ran == ["ls"] and len(approved) == 1
    assert result.messages[-2].parts[0] == ToolResult("s1", "shell", "ran ls\n\nchecked ls")


def test_an_input_edited_to_what_the_model_asked_is_the_same_call_and_asks_no_hook_again():
    ran.clear()
    asked = []

    def counting(event):
        asked.append(event.input)
        return no_rm_rf(event)

    checkpoint, resumer, _ = paused_shell(
        "ls -la", hooks={nacelle.HookPoint.BEFORE_TOOL_CALL: [counting]})
    result = resumer.resume_run(checkpoint, {"s1": {"command": "ls -la"}})
    assert ran == ["ls -la"] and len(asked) == 1
    assert result.messages[-2].parts[0].result == "ran ls -la\n\nchecked ls -la"


def test_an_edited_input_counts_in_the_loop_guard_as_a_new_call():
    """With a guard of 2, the model asking after the resume for the input the person
    wrote is the second identical call, so it is refused."""
    ran.clear()
    checkpoint, _, _ = paused_shell("ls -la", loop_guard=2)
    again = Turn(nacelle.Message(nacelle.Role.ASSISTANT, (
        ToolCall("s2", "shell", '{"command":"ls"}'),)))
    resumer = nacelle.Agent(ScriptedBackend([again, "ok"]), "You help.", tools=[shell],
                            hooks={nacelle.HookPoint.BEFORE_TOOL_CALL: [no_rm_rf]},
                            loop_guard=2)
    result = resumer.resume_run(checkpoint, {"s1": {"command": "ls"}})
    assert ran == ["ls"] and result.stop is Stop.END
    (refused,) = result.messages[-2].parts
    assert refused.failed and "call 2 of shell" in refused.result


def test_an_edited_input_that_fails_the_schema_in_the_loop_is_a_failed_result():
    """Agent.resume refuses a schema-invalid edit up front (ConfigError); the loop
    validates the call it runs all the same, as it would a fresh call."""
    ran.clear()
    checkpoint, resumer, _ = paused_shell("ls -la")
    edited = nacelle.Message(nacelle.Role.ASSISTANT, (ToolCall("s1", "shell", '{"command": 7}'),))
    request = resumer.request(checkpoint.messages[:-1] + (edited,))
    settings = RunSettings(approve=resumer.approve, resume=Resume(checkpoint, {"s1": True}))
    events = list(run(request, nacelle.RunContext(), resumer.backend.turn, settings=settings))
    (result,) = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert ran == [] and "invalid input for shell" in result.error
    with pytest.raises(ConfigError, match="invalid"):
        resumer.resume(checkpoint, {"s1": {"command": 7}})


def test_an_edited_input_the_guard_has_seen_too_often_ends_the_run_without_running():
    ran.clear()
    calls = [ToolCall(f"s{i}", "shell", '{"command": "ls"}') for i in range(3)]
    asks = Turn(nacelle.Message(nacelle.Role.ASSISTANT, tuple(calls) + (
        ToolCall("s9", "shell", '{"command": "ls -la"}'),)))
    options = dict(tools=[shell], loop_guard=2,
                   approve=lambda name, input, ctx: input["command"] == "ls" or nacelle.PAUSE)
    done = nacelle.Agent(ScriptedBackend([asks]), "You help.", **options).run(
        [nacelle.user_text("go")])
    assert done.stop is Stop.PAUSED and ran == ["ls"]
    resumer = nacelle.Agent(ScriptedBackend(["never asked"]), "You help.", **options)
    events = list(resumer.resume(done.checkpoint, {"s9": {"command": "ls"}}))
    assert ran == ["ls"] and events[-1].stop is Stop.LOOP
    (closed,) = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert closed.id == "s9" and "called 4 times" in closed.error
    assert [r.id for r in events[-1].messages[-1].parts] == ["s0", "s1", "s2", "s9"]


def test_a_paused_rounds_settled_tool_media_survive_the_checkpoint_and_the_resume(effects):
    picture = nacelle.Image("image/png", "iVBORw0KGgo=")

    @nacelle.tool
    def snap() -> list:
        """A captioned picture."""
        return ["the view", picture]

    turn = Turn(nacelle.Message(nacelle.Role.ASSISTANT, (
        ToolCall("c1", "snap", "{}"), ToolCall("c2", "send", '{"to": "ann", "body": "hi"}'))))
    agent = nacelle.Agent(ScriptedBackend([turn]), "You help.", tools=[snap, helper.send],
                          approve=lambda name, input, ctx: nacelle.PAUSE if name == "send" else True)
    done = list(agent.stream([nacelle.user_text("go")]))[-1]
    settled = ToolResult("c1", "snap", "the view", content=(nacelle.Text("the view"), picture))
    assert done.checkpoint.results == (settled,)
    back = Checkpoint.loads(done.checkpoint.dumps(key=b"k"), key=b"k")
    assert back == done.checkpoint
    backend = ScriptedBackend(["ok"])
    resumer = nacelle.Agent(backend, "You help.", tools=[snap, helper.send])
    assert list(resumer.resume(back, {"c2": "not now"}))[-1].stop is Stop.END
    assert backend.requests[0].messages[-1].parts[0] == settled


def test_a_checkpoint_result_with_content_that_is_not_media_is_a_checkpoint_error(effects):
    _, done = paused_run()
    body = json.loads(done.checkpoint.dumps())
    body["results"][0]["content"] = [{"type": "finish", "stop": "end"}]
    with pytest.raises(CheckpointError, match="content"):
        Checkpoint.loads(json.dumps(body))
    body["results"][0]["content"] = "x"
    with pytest.raises(CheckpointError, match="content"):
        Checkpoint.loads(json.dumps(body))


NESTED_CHILD = ("import sys; sys.path[:0] = ['tests', '.']; import checkpoint_agent; "
                "checkpoint_agent.resume_nested_main()")


def nested_pause():
    events = list(helper.delegating_agent(helper.delegating_turns()).stream(
        [nacelle.user_text("greet ann")]))
    return events, events[-1]


def test_a_sub_agent_s_pause_pauses_the_parent_with_its_checkpoint_nested(effects):
    events, done = nested_pause()
    assert done.stop is Stop.PAUSED
    paused = [(e.tool.id, e.agent) for e in events
              if e.kind is Kind.TOOL_RESULT and e.tool.paused]
    assert paused == [("c2", ("delegate",)), ("p1", ())]
    cp = done.checkpoint
    assert [p.id for p in cp.pending] == ["p1"] and [r.id for r in cp.results] == ["p2"]
    child = cp.pending[0].child
    assert [p.id for p in child.pending] == ["c2"] and [r.id for r in child.results] == ["c1"]
    assert [p.id for p in cp.waiting()] == ["c2"]
    assert cp.usage.total == 165  # the sub-agent's turn counts in the parent's usage
    text = cp.dumps()
    assert Checkpoint.loads(text) == cp
    body = json.loads(text)
    assert body["version"] == 2 and body["pending"][0]["child"]["pending"][0]["id"] == "c2"


def test_a_nested_checkpoint_changed_is_refused_as_a_flat_one_is(effects):
    _, done = nested_pause()
    signed = done.checkpoint.dumps(key=helper.KEY)

    def edit_child(body):
        body["pending"][0]["child"]["messages"][-1]["parts"][1]["input"] = \
            '{"to": "eve", "body": "hi"}'

    with pytest.raises(CheckpointError, match="signature"):
        Checkpoint.loads(tampered(signed, edit_child), key=helper.KEY)
    with pytest.raises(CheckpointError, match="fingerprint"):
        Checkpoint.loads(tampered(signed, edit_child))
    with pytest.raises(CheckpointError, match="version 2"):
        Checkpoint.loads(tampered(signed, lambda b: b.update(version=1)))


def test_a_version_1_checkpoint_still_loads(effects):
    _, done = paused_run()
    body = json.loads(done.checkpoint.dumps())
    body["version"] = 1
    assert Checkpoint.loads(json.dumps(body)) == done.checkpoint


@pytest.mark.slow
def test_nested_pause_then_resume_in_another_process_runs_each_call_once(effects):
    _, done = nested_pause()
    assert sorted(line[1] for line in lines(effects)) == ["lookup address", "lookup ann"]
    out = subprocess.run([sys.executable, "-c", NESTED_CHILD, json.dumps({"c2": True})],
                         input=done.checkpoint.dumps(key=helper.KEY), capture_output=True,
                         text=True, cwd=str(ROOT), env=os.environ, timeout=60)
    assert out.returncode == 0, out.stderr
    resumed = json.loads(out.stdout)
    assert resumed["stop"] == "end" and resumed["text"] == "All done."
    assert resumed["results"] == [["p1", "Greeted ann."], ["p2", "found ann"]]
    # The sub-agent's pending call, then its next turn, forwarded under the call.
    assert resumed["events"] == [
        ["tool_call", [], "", "p1"],
        ["tool_call", ["delegate"], "p1", "c2"], ["tool_result", ["delegate"], "p1", "c2"],
        ["text", ["delegate"], "p1", "Greeted ann."], ["turn", ["delegate"], "p1", ""],
        ["tool_result", [], "", "p1"],
        ["text", [], "", "All done."], ["turn", [], "", ""],
    ]
    assert resumed["total"] == 165 + 203 + 22
    effects_by_process = lines(effects)
    assert sorted(line[1] for line in effects_by_process) == [
        "lookup address", "lookup ann", "send ann hi"]
    assert effects_by_process[-1][0] != str(os.getpid())  # send ran in the other process


def test_pause_nested_pause_and_fingerprint_are_the_checkpoint_module_s_names():
    # They live in nacelle._pause (a run that never pauses does not load this module)
    # and keep the names they had here, for reprs, pickles and tracebacks.
    import pickle

    import nacelle._pause
    import nacelle.checkpoint as checkpoint

    for name in ("PAUSE", "NestedPause", "fingerprint", "canonical"):
        assert getattr(checkpoint, name) is getattr(nacelle._pause, name)
    assert checkpoint.NestedPause.__module__ == checkpoint.fingerprint.__module__ == \
        "nacelle.checkpoint"
    assert pickle.loads(pickle.dumps(checkpoint.PAUSE)) is nacelle.PAUSE
    assert repr(nacelle.PAUSE) == "nacelle.PAUSE"


def test_the_loop_guard_fingerprints_a_tools_calls_only_once_it_has_a_second(monkeypatch):
    from nacelle import _pause

    made = []

    def spy(name, input):
        made.append(name)
        return fingerprint(name, input)

    monkeypatch.setattr(_pause, "fingerprint", spy)
    repeats = _pause.Repeats()
    assert repeats.add("read", '{"path": "a"}') == 1
    assert repeats.add("write", '{"path": "a", "text": "' + "x" * 1000 + '"}') == 1
    assert made == []  # nothing can repeat a tool's first call
    assert repeats.add("read", '{ "path" : "a" }') == 2  # the same input, written otherwise
    assert made == ["read", "read"]  # the first call's now, and this one's
    assert repeats.add("read", '{"path": "b"}') == 1
    assert dict(repeats.items()) == {
        fingerprint("read", '{"path": "a"}'): 2, fingerprint("read", '{"path": "b"}'): 1,
        fingerprint("write", '{"path": "a", "text": "' + "x" * 1000 + '"}'): 1}
    assert repeats.add("write", '{"text": "' + "x" * 1000 + '", "path": "a"}') == 2


def test_a_call_the_loop_guard_would_refuse_is_not_counted_when_asked_so():
    from nacelle._pause import Repeats

    repeats = Repeats()
    assert [repeats.add("read", "{}", unless=2) for _ in range(3)] == [1, 2, 2]
    assert repeats.add("write", "{}", unless=1) == 1
    assert repeats.items() == ((fingerprint("read", "{}"), 1),)


def test_a_resumed_runs_loop_guard_fingerprints_each_call_against_the_checkpoints_counts():
    from nacelle._pause import Repeats

    repeats = Repeats([(fingerprint("read", '{"path": "a"}'), 1)])
    assert repeats.add("read", '{"path":"a"}') == 2  # the checkpoint does not say its tools
    assert repeats.add("write", "{}") == 1
    assert dict(repeats.items()) == {fingerprint("read", '{"path": "a"}'): 2,
                                     fingerprint("write", "{}"): 1}
