"""subagent_tool: a fresh run per call, the recursion guard, approvals, usage and
the final text only."""

import dataclasses
import os
import pickle
import threading
import time

import pytest

import nacelle
from nacelle import (
    Agent, Capabilities, ConfigError, Message, MCPServer, Role, Text, ToolCall, ToolContext,
    Unsupported, Usage, subagent_tool, user_text,
)
from nacelle.testing import ScriptedBackend, Turn


@nacelle.tool
def fetch(key: str) -> str:
    """Fetch a value."""
    return f"value of {key}"


def assistant(*parts):
    return Message(Role.ASSISTANT, parts)


def test_a_call_is_a_fresh_run_whose_final_text_is_the_result():
    script = ScriptedBackend([
        # the parent delegates
        assistant(ToolCall("p1", "subagent", '{"task": "find k"}')),
        # the child works, then answers
        assistant(Text("thinking out loud"), ToolCall("s1", "fetch", '{"key": "k"}')),
        assistant(Text("k is 7")),
        # the parent finishes
        assistant(Text("The answer is 7.")),
    ])
    base = Agent(script, "You are the parent.", tools=[fetch])
    helper = subagent_tool(base, approve=lambda *a: True)
    parent = Agent(script, "You are the parent.", tools=[fetch, helper])
    result = parent.run([user_text("what is k?")])
    assert result.text == "The answer is 7."
    assert result.messages[2].parts[0].result == "k is 7"
    child_first = script.requests[1]
    assert child_first.messages == (user_text("find k"),)
    assert child_first.messages[-1].parts == (Text("find k"),)
    assert script.requests[2].messages[-1].parts[0].result == "value of k"
    script.assert_consumed()


def test_the_sub_agent_cannot_call_itself():
    script = ScriptedBackend([])
    base = Agent(script, "sys", tools=[fetch])
    helper = subagent_tool(base, name="delegate")
    parent = Agent(script, "sys", tools=[fetch, helper])
    inner = subagent_tool(parent, name="delegate")
    assert [t.name for t in inner.agent.tools] == ["fetch"]


def test_approvals_are_denied_unless_approve_is_given():
    script = ScriptedBackend([
        assistant(ToolCall("s1", "fetch", '{"key": "k"}')),
        assistant(Text("could not fetch")),
    ])
    helper = subagent_tool(Agent(script, "sys", tools=[fetch]))
    assert helper.run({"task": "t"}, ToolContext()) == "could not fetch"
    assert script.requests[1].messages[-1].parts[0].failed


def test_a_sub_agent_whose_approval_pauses_pauses_the_parent_and_resumes_where_it_stood():
    ran = []

    @nacelle.tool
    def send(to: str) -> str:
        """Send something."""
        ran.append(to)
        return "sent"

    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "tell ann"}'),
                  ToolCall("p2", "fetch", '{"key": "k"}')),
        assistant(Text("Sending it now."), ToolCall("s0", "fetch", '{"key": "x"}'),
                  ToolCall("s1", "send", '{"to": "ann"}')),
    ])
    fetched = []
    approve = lambda name, *a: nacelle.PAUSE if name == "send" else True  # noqa: E731

    @nacelle.tool
    def fetch(key: str) -> str:
        """Fetch a value."""
        fetched.append(key)
        return f"value of {key}"

    helper = subagent_tool(Agent(script, "sys", tools=[send, fetch]), approve=approve)
    parent = Agent(script, "sys", tools=[helper, fetch])
    result = parent.run([user_text("tell ann")])
    assert result.stop is nacelle.Stop.PAUSED and ran == [] and sorted(fetched) == ["k", "x"]
    checkpoint = result.checkpoint
    (outer,) = checkpoint.pending
    assert outer.id == "p1" and outer.child is not None
    assert [p.id for p in checkpoint.waiting()] == ["s1"]
    assert [r.id for r in outer.child.results] == ["s0"]
    text = checkpoint.dumps(key="k")
    assert '"version": 2' in text
    again = nacelle.Checkpoint.loads(text, key="k")
    assert again.waiting() == checkpoint.waiting()

    script = ScriptedBackend([assistant(Text("Sent to ann.")), assistant(Text("Ann is told."))])
    helper = subagent_tool(Agent(script, "sys", tools=[send, fetch]), approve=approve)
    parent = Agent(script, "sys", tools=[helper, fetch])
    events = list(parent.resume(again, {"s1": True}))
    done = events[-1]
    assert done.stop is nacelle.Stop.END and done.messages[-1].text == "Ann is told."
    assert ran == ["ann"] and sorted(fetched) == ["k", "x"]  # nothing ran twice
    child_saw = script.requests[0].messages
    assert [r.result for r in child_saw[-1].parts] == ["value of x", "sent"]
    parent_saw = script.requests[1].messages[-1].parts
    assert [(r.id, r.result) for r in parent_saw] == [("p1", "Sent to ann."),
                                                      ("p2", "value of k")]
    with pytest.raises(ConfigError, match="not pending"):
        parent.resume(again, {"s1": True, "p1": True})
    with pytest.raises(ConfigError, match="no decision"):
        parent.resume(again, {})
    with pytest.raises(ConfigError, match="invalid"):
        parent.resume(again, {"s1": {"to": 3}})


def _tags(events):
    return [(e.kind.value, e.agent, e.via, e.text or (e.tool.id if e.tool else ""))
            for e in events]


def test_forwarded_events_come_as_they_happen_tagged_with_the_sub_agent_and_the_call():
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "find k"}')),
        assistant(Text("looking"), ToolCall("s1", "fetch", '{"key": "k"}')),
        assistant(Text("k is 7")),
        assistant(Text("The answer is 7.")),
    ])
    helper = subagent_tool(Agent(script, "sys", tools=[fetch]), approve=lambda *a: True,
                           forward=True)
    events = list(Agent(script, "sys", tools=[helper]).stream([user_text("k?")]))
    sub = ("subagent",)
    assert _tags(events) == [
        ("tool_input", (), "", '{"task": "find k"}'), ("tool_call", (), "", "p1"),
        ("turn", (), "", ""), ("text", sub, "p1", "looking"),
        ("tool_input", sub, "p1", '{"key": "k"}'), ("tool_call", sub, "p1", "s1"),
        ("turn", sub, "p1", ""),
        ("tool_result", sub, "p1", "s1"), ("text", sub, "p1", "k is 7"), ("turn", sub, "p1", ""),
        ("tool_result", (), "", "p1"), ("text", (), "", "The answer is 7."),
        ("turn", (), "", ""), ("done", (), "", ""),
    ]
    # The forwarded TOOL_RESULT closed none of the parent's calls: p1 has its own.
    assert events[-1].messages[2].parts[0].result == "k is 7"


def test_a_grandchild_s_events_nest_their_path_and_keep_the_call_that_started_it():
    script = ScriptedBackend([
        assistant(ToolCall("p1", "child", '{"task": "a"}')),
        assistant(Text("asking"), ToolCall("c1", "grand", '{"task": "b"}')),
        assistant(Text("deep")),
        assistant(Text("mid")),
        assistant(Text("top")),
    ])
    grand = subagent_tool(Agent(script, "grand"), name="grand", forward=True)
    child = subagent_tool(Agent(script, "child", tools=[grand]), name="child", forward=True,
                          approve=lambda *a: True)
    events = list(Agent(script, "sys", tools=[child]).stream([user_text("go")]))
    two, one = ("child", "grand"), ("child",)
    assert _tags(events) == [
        ("tool_input", (), "", '{"task": "a"}'), ("tool_call", (), "", "p1"),
        ("turn", (), "", ""), ("text", one, "p1", "asking"),
        ("tool_input", one, "p1", '{"task": "b"}'), ("tool_call", one, "p1", "c1"),
        ("turn", one, "p1", ""),
        ("text", two, "c1", "deep"), ("turn", two, "c1", ""),
        ("tool_result", one, "p1", "c1"), ("text", one, "p1", "mid"), ("turn", one, "p1", ""),
        ("tool_result", (), "", "p1"), ("text", (), "", "top"), ("turn", (), "", ""),
        ("done", (), "", ""),
    ]


def test_forwarding_is_off_by_default():
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "find k"}')),
        assistant(Text("looking"), ToolCall("s1", "fetch", '{"key": "k"}')),
        assistant(Text("k is 7")),
        assistant(Text("The answer is 7.")),
    ])
    helper = subagent_tool(Agent(script, "sys", tools=[fetch]), approve=lambda *a: True)
    events = list(Agent(script, "sys", tools=[helper]).stream([user_text("k?")]))
    assert all(e.agent == () and e.via == "" for e in events)
    assert [e.text for e in events if e.kind is nacelle.Kind.TEXT] == ["The answer is 7."]


def test_the_sub_agent_s_spend_counts_in_the_parent_s_total_and_budget():
    ran = []

    @nacelle.tool
    def note(text: str) -> str:
        """Note something."""
        ran.append(text)
        return "noted"

    script = ScriptedBackend([
        Turn(assistant(ToolCall("p1", "subagent", '{"task": "t"}')), usage=Usage(10, 0)),
        Turn(assistant(Text("child answer")), usage=Usage(500, 100)),
        Turn(assistant(ToolCall("p2", "note", '{"text": "x"}')), usage=Usage(10, 0)),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    parent = Agent(script, "sys", tools=[helper, note], budget=nacelle.Budget(tokens=200))
    events = list(parent.stream([user_text("go")]))
    done = events[-1]
    assert done.usage == Usage(520, 100) and done.stop is nacelle.Stop.BUDGET
    assert ran == []  # the budget, spent by the sub-agent, stopped the parent's next call
    # Summing every TURN of the stream (the child's are forwarded) gives the total.
    turns = [e.usage for e in events if e.kind is nacelle.Kind.TURN]
    assert sum(turns, Usage()) == done.usage


def test_cancelling_the_parent_run_cancels_the_sub_agent_s_tools():
    started, stopped = threading.Event(), threading.Event()

    @nacelle.tool(name="wait")
    def wait_for(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        started.set()
        if ctx.cancelled.wait(10):
            stopped.set()
        return "woke"

    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        assistant(ToolCall("s1", "wait", "{}")),
    ])
    helper = subagent_tool(Agent(script, "sys", tools=[wait_for]), approve=lambda *a: True)
    cancel = nacelle.CancelEvent()
    threading.Thread(target=lambda: started.wait(10) and cancel.set(), daemon=True).start()
    with pytest.raises(nacelle.Cancelled):
        list(Agent(script, "sys", tools=[helper]).stream([user_text("go")], cancel=cancel))
    assert stopped.wait(5)


def test_nested_usage_is_passed_to_on_usage():
    spent = []
    script = ScriptedBackend([
        Turn(assistant(ToolCall("s1", "fetch", '{"key": "k"}')), usage=Usage(10, 2, cost=0.1)),
        Turn(assistant(Text("done")), usage=Usage(20, 3, cost=0.2)),
    ])
    helper = subagent_tool(Agent(script, "sys", tools=[fetch]), approve=lambda *a: True,
                           on_usage=spent.append)
    assert helper.run({"task": "t"}, ToolContext()) == "done"
    assert spent == [Usage(10, 2, cost=0.1) + Usage(20, 3, cost=0.2)]


def test_system_and_max_iterations_override_the_base():
    script = ScriptedBackend([assistant(ToolCall("s1", "fetch", '{"key": "k"}'))])
    helper = subagent_tool(Agent(script, "base", tools=[fetch]), system="focused",
                           max_iterations=1, approve=lambda *a: True)
    with pytest.raises(RuntimeError, match=r"stopped \(iterations\)"):
        helper.run({"task": "t"}, ToolContext())
    assert script.requests[0].system == "focused" and len(script.requests) == 1


def test_the_schema_takes_one_task_string():
    helper = subagent_tool(Agent(ScriptedBackend([]), "sys"))
    assert helper.schema["required"] == ["task"]
    assert helper.schema["properties"]["task"]["type"] == "string"
    assert helper.name == "subagent" and helper.description


def test_an_unsupported_configuration_fails_when_the_tool_is_made():
    script = ScriptedBackend([], capabilities=Capabilities(mcp=True))
    base = Agent(script, "sys", mcp=[MCPServer("m", "https://example.com")])
    script.capabilities = Capabilities()
    with pytest.raises(Unsupported):
        subagent_tool(base)


def test_a_bad_name_is_refused():
    with pytest.raises(ConfigError):
        subagent_tool(Agent(ScriptedBackend([]), "sys"), name="sub agent")


def test_a_subagent_tool_pickles_with_its_agent():
    helper = subagent_tool(Agent(ScriptedBackend([assistant(Text("hi"))]), "sys", tools=[fetch]))
    copy = pickle.loads(pickle.dumps(helper))
    assert copy.run({"task": "t"}, ToolContext()) == "hi"


def test_cancelling_the_call_cancels_the_nested_run():
    script = ScriptedBackend([Turn(assistant(Text("slow")), delay=10)])
    helper = subagent_tool(Agent(script, "sys"))
    ctx = ToolContext()
    ctx.cancelled.set()
    with pytest.raises(nacelle.Cancelled):
        helper.run({"task": "t"}, ctx)


def test_a_sub_agent_is_held_to_what_the_parent_s_budget_has_left():
    fetched = []

    @nacelle.tool(name="fetch")
    def counted_fetch(key: str) -> str:
        """Fetch a value."""
        fetched.append(key)
        return "v"

    script = ScriptedBackend([
        Turn(assistant(ToolCall("p1", "subagent", '{"task": "t"}')), usage=Usage(10, 0)),
        Turn(assistant(ToolCall("s1", "fetch", '{"key": "k"}')), usage=Usage(500, 0)),
        Turn(assistant(Text("giving up")), usage=Usage(10, 0)),
    ])
    helper = subagent_tool(Agent(script, "sys", tools=[counted_fetch]), approve=lambda *a: True)
    parent = Agent(script, "sys", tools=[helper], budget=nacelle.Budget(tokens=200))
    result = parent.run([user_text("go")])
    assert fetched == []  # the child's turn spent what the parent had left
    closed = result.messages[2].parts[0]
    assert closed.failed and "stopped (budget)" in closed.result
    assert result.stop is nacelle.Stop.END and result.usage == Usage(520, 0)


def test_a_sub_agent_started_eagerly_forwards_and_pauses_as_one_started_at_the_turn_s_end():
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        Turn(assistant(ToolCall("s1", "fetch", '{"key": "k"}')), usage=Usage(500, 0)),
    ])
    helper = subagent_tool(Agent(script, "sys", tools=[fetch]), forward=True,
                           approve=lambda *a: nacelle.PAUSE)
    parent = Agent(script, "sys", tools=[helper], eager_tools=True,
                   budget=nacelle.Budget(tokens=1000))
    events = list(parent.stream([user_text("go")]))
    done = events[-1]
    assert done.stop is nacelle.Stop.PAUSED and done.usage == Usage(500, 0)
    assert [p.id for p in done.checkpoint.waiting()] == ["s1"]
    assert [(e.kind.value, e.agent, e.via) for e in events if e.kind is nacelle.Kind.TOOL_RESULT] \
        == [("tool_result", ("subagent",), "p1"), ("tool_result", (), "")]


def test_the_sub_agent_keeps_the_base_s_loop_guard():
    script = ScriptedBackend([assistant(ToolCall(f"s{i}", "fetch", '{"key": "k"}'))
                              for i in range(4)])
    helper = subagent_tool(Agent(script, "sys", tools=[fetch], loop_guard=2),
                           approve=lambda *a: True)
    assert helper.agent.loop_guard == 2
    with pytest.raises(RuntimeError, match=r"stopped \(loop\)"):
        helper.run({"task": "t"}, ToolContext())


def _paused_delegation(child_call_id="s1"):
    sent = []

    @nacelle.tool
    def send(to: str) -> str:
        """Send something."""
        sent.append(to)
        return f"sent to {to}"

    def team(script):
        helper = subagent_tool(Agent(script, "sys", tools=[send]),
                               approve=lambda *a: nacelle.PAUSE)
        return Agent(script, "sys", tools=[helper])

    script = ScriptedBackend([assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
                              assistant(ToolCall(child_call_id, "send", '{"to": "ann"}'))])
    return team, team(script).run([user_text("go")]).checkpoint, sent


def test_a_sub_agent_s_call_resumed_with_an_edited_input_runs_with_it():
    team, checkpoint, sent = _paused_delegation()
    script = ScriptedBackend([assistant(Text("sent to bob")), assistant(Text("done"))])
    result = team(script).resume_run(checkpoint, {"s1": {"to": "bob"}})
    assert sent == ["bob"] and result.text == "done"
    assert script.requests[0].messages[-2].parts[0].input == '{"to": "bob"}'


def test_a_sub_agent_s_call_may_share_its_id_with_the_call_that_started_it():
    team, checkpoint, _ = _paused_delegation(child_call_id="p1")
    assert [p.id for p in checkpoint.waiting()] == ["p1"]  # the child's, not the parent's
    with pytest.raises(ConfigError, match="not pending"):
        team(ScriptedBackend([])).resume(checkpoint, {"p1": True, "p2": True})
    result = team(ScriptedBackend([assistant(Text("ok")), assistant(Text("done"))])).resume_run(
        checkpoint, {"p1": True})
    assert result.text == "done"


def test_two_waiting_calls_under_one_id_are_decided_by_their_paths():
    child_turn = assistant(ToolCall("s1", "fetch", '{"key": "k"}'))
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "a"}'),
                  ToolCall("p2", "subagent", '{"task": "b"}')),
        child_turn, child_turn,
    ])
    helper = subagent_tool(Agent(script, "sys", tools=[fetch]), approve=lambda *a: nacelle.PAUSE)
    parent = Agent(script, "sys", tools=[helper])
    checkpoint = parent.run([user_text("go")]).checkpoint
    assert [p.id for p in checkpoint.waiting()] == ["s1", "s1"]
    with pytest.raises(ConfigError, match=r"share the id 's1': key their decisions by path "
                                          r"\(\['p1/s1', 'p2/s1'\]\)"):
        parent.resume(checkpoint, {"s1": True})
    with pytest.raises(ConfigError, match=r"no decision for the pending calls \['p2/s1'\]"):
        parent.resume(checkpoint, {"p1/s1": True})
    script = ScriptedBackend([assistant(Text("a done")), assistant(Text("b done")),
                              assistant(Text("all done"))])
    helper = subagent_tool(Agent(script, "sys", tools=[fetch]), approve=lambda *a: nacelle.PAUSE)
    result = Agent(script, "sys", tools=[helper]).resume_run(
        checkpoint, {"p1/s1": True, "p2/s1": "not this one"})
    assert result.text == "all done"
    answers = sorted(r.result for r in result.messages[-2].parts)
    assert answers == ["a done", "b done"]


def test_a_long_forwarded_run_arrives_whole_in_order_and_identical_to_its_replace_before_the_result():
    deltas = [Text(f"d{i} ") for i in range(3000)]
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        assistant(*deltas),
        assistant(Text("end")),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    events = list(Agent(script, "sys", tools=[helper]).stream([user_text("go")]))
    forwarded = [e for e in events if e.via]
    assert [e.text for e in forwarded if e.kind is nacelle.Kind.TEXT] == [d.text for d in deltas]
    # Every forwarded event comes before the result of the call it came through.
    closing = next(i for i, e in enumerate(events)
                   if e.kind is nacelle.Kind.TOOL_RESULT and not e.via)
    assert all(i < closing for i, e in enumerate(events) if e.via)
    # Each is the child's event with agent and via replaced, and nothing else.
    for event in forwarded:
        assert type(event) is nacelle.Event and event.agent == ("subagent",)
        untagged = {**vars(event), "agent": (), "via": ""}
        assert nacelle.Event(**untagged) == dataclasses.replace(event, agent=(), via="")
        assert vars(event) == vars(dataclasses.replace(event))
    assert len(forwarded) == 3000 + 1  # the deltas and the child's TURN


def test_cancelling_while_forwarded_events_wait_stops_the_run_and_closes_the_call_once():
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        Turn(assistant(*[Text(f"d{i} ") for i in range(200)]), gap=0.001),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    cancel = nacelle.CancelEvent()
    seen = []
    with pytest.raises(nacelle.Cancelled):
        for event in Agent(script, "sys", tools=[helper]).stream([user_text("go")],
                                                                 cancel=cancel):
            seen.append(event)
            if event.via and len([e for e in seen if e.via]) == 5:
                cancel.set()
    texts = [e.text for e in seen if e.via and e.kind is nacelle.Kind.TEXT]
    assert texts == [f"d{i} " for i in range(len(texts))]  # in order, none lost between
    assert len(texts) < 200
    opened = [e.tool.id for e in seen if e.kind is nacelle.Kind.TOOL_CALL and not e.via]
    closed = [e.tool for e in seen if e.kind is nacelle.Kind.TOOL_RESULT and not e.via]
    assert opened == ["p1"] and [t.id for t in closed] == ["p1"]
    assert closed[0].error and "cancelled" in closed[0].error


def test_a_child_on_a_real_wire_forwards_its_tool_input_and_every_field_reads_as_replace_gives():
    # The Anthropic stream's TOOL_INPUT keeps the fields it leaves at their defaults
    # out of its own dict (they are read from the class): the forwarded copy must
    # read the same, with only agent and via replaced.
    from nacelle.backends import anthropic
    from nacelle.testing.server import FakeServer, Reply
    from nacelle.testing.wire import anthropic_stream

    with FakeServer() as server:
        server.queue("/v1/messages",
                     Reply(chunks=anthropic_stream(["Looking."], tool_calls=[
                         ("toolu_c1", "fetch", '{"key": "k"}')])),
                     Reply(chunks=anthropic_stream(["k is 7."])))
        child = Agent(anthropic.Backend(api_key="sk-test", base_url=server.url,
                                        max_retries=0), "sys", tools=[fetch])
        helper = subagent_tool(child, approve=lambda *a: True, forward=True)
        script = ScriptedBackend([assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
                                  assistant(Text("done"))])
        events = list(Agent(script, "sys", tools=[helper]).stream([user_text("go")]))
    forwarded = [e for e in events if e.via]
    kinds = [e.kind for e in forwarded]
    assert nacelle.Kind.TOOL_INPUT in kinds and nacelle.Kind.TOOL_RESULT in kinds
    for event in forwarded:
        assert (event.agent, event.via) == (("subagent",), "p1")
        fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
        assert dataclasses.replace(event) == nacelle.Event(**fields)
    inputs = [e for e in forwarded if e.kind is nacelle.Kind.TOOL_INPUT]
    assert "".join(e.text for e in inputs) == '{"key": "k"}'
    assert inputs[-1].tool.input == '{"key": "k"}' and inputs[-1].tool.id == "toolu_c1"
    assert events[-1].messages[2].parts[0].result == "k is 7."



def _wire_child(server, replies, **options):
    """A child on the real Anthropic wire (its deltas made by the built-in turn)."""
    from nacelle.backends import anthropic
    from nacelle.testing.server import Reply
    from nacelle.testing.wire import anthropic_stream

    server.queue("/v1/messages", *(Reply(chunks=anthropic_stream(texts)) for texts in replies))
    return Agent(anthropic.Backend(api_key="sk-test", base_url=server.url, max_retries=0),
                 "sys", **options)


def _delegating(helper):
    script = ScriptedBackend([assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
                              assistant(Text("done"))])
    return Agent(script, "sys", tools=[helper])


def test_a_forwarded_child_s_deltas_are_tagged_and_its_next_run_alone_is_not():
    # The child's deltas are made tagged by its turn (RunContext._tags): the tags
    # belong to that run, not to the child Agent.
    from nacelle.testing.server import FakeServer

    with FakeServer() as server:
        child = _wire_child(server, [["one ", "two"], ["alone"]])
        events = list(_delegating(subagent_tool(child, forward=True)).stream([user_text("go")]))
        texts = [e for e in events if e.kind is nacelle.Kind.TEXT and e.via]
        assert [(e.text, e.agent, e.via) for e in texts] == [
            ("one ", ("subagent",), "p1"), ("two", ("subagent",), "p1")]
        assert all(dataclasses.replace(e) == e for e in texts)
        alone = [e for e in child.stream([user_text("go")]) if e.kind is nacelle.Kind.TEXT]
    assert [(e.text, e.agent, e.via) for e in alone] == [("alone", (), "")]


def test_a_forwarded_child_s_observer_sees_its_own_deltas_untagged():
    from nacelle.testing.server import FakeServer

    seen = []

    def watch(observation):
        seen.append(observation.data["event"])

    watch.events = True
    with FakeServer() as server:
        child = _wire_child(server, [["one ", "two"]], observers=[watch])
        events = list(_delegating(subagent_tool(child, forward=True)).stream([user_text("go")]))
    observed = [e for e in seen if e.kind is nacelle.Kind.TEXT]
    forwarded = [e for e in events if e.kind is nacelle.Kind.TEXT and e.via]
    assert [(e.text, e.agent, e.via) for e in observed] == [("one ", (), ""), ("two", (), "")]
    assert [(e.text, e.agent) for e in forwarded] == [("one ", ("subagent",)),
                                                      ("two", ("subagent",))]


def test_forwarding_never_changes_an_event_a_backend_yields_again():
    # A backend of one's own may hold its events and yield them again: forwarding
    # tags a copy of each, never the event itself.
    shared = nacelle.Event(nacelle.Kind.TEXT, text="again ")

    class Repeating(ScriptedBackend):
        def turn(self, request, messages, ctx):
            yield shared
            yield shared
            yield from super().turn(request, messages, ctx)

    child = Agent(Repeating([assistant(Text("end"))]), "sys")
    events = list(_delegating(subagent_tool(child, forward=True)).stream([user_text("go")]))
    tagged = [e for e in events if e.kind is nacelle.Kind.TEXT and e.via]
    assert [(e.text, e.agent) for e in tagged][:2] == [("again ", ("subagent",))] * 2
    assert (shared.agent, shared.via) == ((), "")


# -- a forwarding sub-agent iterated on the consumer's thread ---------------------------


class _ThreadNoting(ScriptedBackend):
    """A ScriptedBackend that notes the thread each turn is played on."""

    def __init__(self, turns):
        super().__init__(turns)
        self.threads = []

    def turn(self, request, messages, ctx):
        self.threads.append(threading.current_thread().name)
        yield from super().turn(request, messages, ctx)


def _tool_threads():
    return [t for t in threading.enumerate() if t.name.startswith("nacelle-tool-")]


def _until_gone(seconds=5.0):
    import time
    deadline = time.monotonic() + seconds
    while _tool_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    return _tool_threads()


def test_a_forwarding_sub_agent_alone_in_its_round_runs_on_the_consumer_s_thread():
    script = _ThreadNoting([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        assistant(Text("child says"), Text(" hi")),
        assistant(Text("done")),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    events = list(Agent(script, "sys", tools=[helper]).stream([user_text("go")]))
    here = threading.current_thread().name
    assert script.threads == [here, here, here]
    assert [e.text for e in events if e.via and e.kind is nacelle.Kind.TEXT] == [
        "child says", " hi"]
    result = [e.tool for e in events if e.kind is nacelle.Kind.TOOL_RESULT and not e.via]
    assert [(t.id, t.result, t.error) for t in result] == [("p1", "child says hi", None)]



class _DepthNoting(ScriptedBackend):
    """A ScriptedBackend that notes, as each turn yields its first event, how many
    generators stand between it and the code iterating the run."""

    def __init__(self, turns):
        super().__init__(turns)
        self.depths = []

    def turn(self, request, messages, ctx):
        import sys

        frame, depth = sys._getframe(), 0
        while frame is not None and frame.f_code.co_name != "_consume":
            frame, depth = frame.f_back, depth + 1
        self.depths.append(depth)
        yield from super().turn(request, messages, ctx)


def _consume(events):
    return [event for event in events]


def test_a_handed_over_run_s_events_climb_only_the_parent_s_own_generator_and_the_tagging():
    # The round yields the handover up to Agent._stream, which iterates it: a forwarded
    # event passes that generator and the tagging one, not the loop's as well.
    script = _DepthNoting([assistant(Text("alone")),
                           assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
                           assistant(Text("child")), assistant(Text("done"))])
    child = Agent(script, "sys")
    _consume(child.stream([user_text("go")]))
    parent = Agent(script, "sys", tools=[subagent_tool(child, forward=True)])
    events = _consume(parent.stream([user_text("go")]))
    alone, _, forwarded, _ = script.depths
    assert forwarded - alone == 2  # Agent._stream and subagent._tagged
    assert [e.text for e in events if e.via and e.kind is nacelle.Kind.TEXT] == ["child"]

def test_a_sub_agent_that_does_not_forward_runs_on_its_call_s_thread():
    script = _ThreadNoting([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        assistant(Text("child")),
        assistant(Text("done")),
    ])
    helper = subagent_tool(Agent(script, "sys"))
    assert Agent(script, "sys", tools=[helper]).run([user_text("go")]).text == "done"
    assert script.threads[1] == "nacelle-tool-subagent"


def test_a_forwarding_sub_agent_beside_another_call_runs_on_its_own_thread():
    script = _ThreadNoting([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}'),
                  ToolCall("p2", "fetch", '{"key": "k"}')),
        assistant(Text("child")),
        assistant(Text("done")),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    events = list(Agent(script, "sys", tools=[helper, fetch]).stream([user_text("go")]))
    assert script.threads[1] == "nacelle-tool-subagent"
    closed = sorted(e.tool.id for e in events if e.kind is nacelle.Kind.TOOL_RESULT
                    and not e.via)
    assert closed == ["p1", "p2"]
    assert [e.text for e in events if e.via and e.kind is nacelle.Kind.TEXT] == ["child"]


def test_a_forwarding_sub_agent_under_a_tool_timeout_runs_on_its_own_thread_and_times_out():
    script = _ThreadNoting([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        Turn(assistant(*[Text(f"d{i} ") for i in range(400)]), gap=0.01),
        assistant(Text("gave up on it")),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    agent = Agent(script, "sys", tools=[helper], tool_timeout=0.3)
    events = list(agent.stream([user_text("go")]))
    assert script.threads[1] == "nacelle-tool-subagent"
    result = [e.tool for e in events if e.kind is nacelle.Kind.TOOL_RESULT and not e.via]
    assert len(result) == 1 and "timed out after 0.3 s" in result[0].error
    assert events[-1].messages[-1].text == "gave up on it"
    assert _until_gone() == []


def test_a_forwarding_sub_agent_with_observers_runs_on_its_own_thread():
    script = _ThreadNoting([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        assistant(Text("child")),
        assistant(Text("done")),
    ])
    seen = []
    child = Agent(script, "sys", observers=[lambda observation: seen.append(observation.kind)])
    helper = subagent_tool(child, forward=True)
    assert Agent(script, "sys", tools=[helper]).run([user_text("go")]).text == "done"
    assert script.threads[1] == "nacelle-tool-subagent"
    assert "run.start" in seen


def test_a_consumer_that_stops_reading_in_the_middle_of_a_forwarded_run_leaves_no_call_waiting():
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        Turn(assistant(*[Text(f"d{i} ") for i in range(400)]), gap=0.01),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    events = Agent(script, "sys", tools=[helper]).stream([user_text("go")])
    texts = []
    for event in events:
        if event.via and event.kind is nacelle.Kind.TEXT:
            texts.append(event.text)
            if len(texts) == 3:
                break
    events.close()
    assert texts == ["d0 ", "d1 ", "d2 "]
    # The call's thread took the child's run back, found it cancelled, and ended.
    assert _until_gone() == []


def test_a_failing_forwarded_run_fails_its_call_with_the_child_s_error():
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        Turn(assistant(Text("partial")), error=nacelle.TransportError("the child's wire broke")),
        assistant(Text("carried on")),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    events = list(Agent(script, "sys", tools=[helper]).stream([user_text("go")]))
    result = [e.tool for e in events if e.kind is nacelle.Kind.TOOL_RESULT and not e.via]
    assert len(result) == 1 and "the child's wire broke" in result[0].error
    assert events[-1].messages[-1].text == "carried on"


def test_a_ctrl_c_while_the_consumer_runs_a_forwarded_child_reaches_the_consumer():
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        Turn(assistant(Text("partial")), error=KeyboardInterrupt()),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    seen = []
    with pytest.raises(KeyboardInterrupt):
        for event in Agent(script, "sys", tools=[helper]).stream([user_text("go")]):
            seen.append(event)
    assert [e.text for e in seen if e.via and e.kind is nacelle.Kind.TEXT] == ["partial"]
    assert _until_gone() == []


def _run_script(tmp_path, turns, body):
    """Run, in a fresh interpreter on this tree, a script whose parent delegates to a
    forwarding sub-agent playing ``turns`` (Python source of the child's turns and
    the parent's last), then ``body``; the finished process, and how long it took."""
    import subprocess
    import sys
    import time

    script = tmp_path / "script.py"
    script.write_text(
        "import threading\n"
        "import nacelle\n"
        "from nacelle import Agent, Message, Role, Text, ToolCall, subagent_tool, user_text\n"
        "from nacelle.testing import ScriptedBackend, Turn\n"
        "def assistant(*parts):\n"
        "    return Message(Role.ASSISTANT, parts)\n"
        "script = ScriptedBackend([\n"
        "    assistant(ToolCall('p1', 'subagent', '{\"task\": \"t\"}')),\n"
        f"{turns}"
        "])\n"
        "helper = subagent_tool(Agent(script, 'sys'), forward=True)\n"
        f"{body}")
    root = os.path.dirname(os.path.dirname(os.path.abspath(nacelle.__file__)))
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=root))
    return done, time.monotonic() - started


def test_a_forwarded_run_left_open_at_exit_does_not_hold_the_interpreter(tmp_path):
    done, took = _run_script(
        tmp_path,
        "    Turn(assistant(*[Text(f'd{i} ') for i in range(2000)]), gap=0.05),\n",
        "EVENTS = Agent(script, 'sys', tools=[helper]).stream([user_text('go')])\n"
        "seen = 0\n"
        "for event in EVENTS:\n"
        "    seen += bool(event.via)\n"
        "    if seen == 3:\n"
        "        break\n"
        "print('read', seen, flush=True)\n")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "read 3"
    # The child's run would take 100 s; the call's thread lets the interpreter go.
    assert took < 30


def test_a_forwarded_run_read_by_a_thread_that_outlives_the_main_one_runs_to_its_end(tmp_path):
    done, _ = _run_script(
        tmp_path,
        "    Turn(assistant(*[Text(f'd{i} ') for i in range(30)]), gap=0.05),\n"
        "    assistant(Text('done')),\n",
        "forwarding = threading.Event()\n"
        "def read():\n"
        "    events = []\n"
        "    for event in Agent(script, 'sys', tools=[helper]).stream([user_text('go')]):\n"
        "        events.append(event)\n"
        "        if event.via:\n"
        "            forwarding.set()\n"
        "    closed = [e.tool for e in events\n"
        "              if e.kind is nacelle.Kind.TOOL_RESULT and not e.via]\n"
        "    print(len([e for e in events if e.via]), closed[0].error, flush=True)\n"
        "threading.Thread(target=read).start()\n"
        # The main thread ends once the call runs (from 3.12 no thread starts after it
        # has ended, so the call's must be running by then).
        "forwarding.wait(30)\n")
    assert done.returncode == 0, done.stderr[-2000:]
    # The 30 deltas and the child's TURN were forwarded, and the call did not fail:
    # its thread waited for the reading thread, alive, though the main one was gone.
    assert done.stdout.split() == ["31", "None"]


def test_a_forwarded_run_left_open_by_a_thread_that_ended_lets_its_call_s_thread_go():
    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "t"}')),
        Turn(assistant(*[Text(f"d{i} ") for i in range(400)]), gap=0.01),
    ])
    helper = subagent_tool(Agent(script, "sys"), forward=True)
    kept = []

    def read():
        events = Agent(script, "sys", tools=[helper]).stream([user_text("go")])
        kept.append(events)  # still referenced, so never closed by the collector
        seen = 0
        for event in events:
            seen += bool(event.via)
            if seen == 3:
                return

    reader = threading.Thread(target=read)
    reader.start()
    reader.join()
    try:
        assert _until_gone() == []
    finally:
        kept[0].close()


def test_a_sub_agent_called_in_one_run_after_another_keeps_its_connection():
    # Each call runs on a thread of its own; the thread that ended leaves its session
    # (and its open connection) to the next call's, so a sub-agent on HTTPS does not
    # make a TLS handshake per call.
    from nacelle.testing.server import FakeServer

    with FakeServer() as server:
        child = _wire_child(server, [["first"], ["second"], ["third"]])
        idle = child.backend._endpoint.transport._idle
        for expected in ("first", "second", "third"):
            done = _delegating(subagent_tool(child)).run([user_text("go")])
            assert done.messages[2].parts[0].result == expected
            # The call's thread hands its session back as it ends, just after its
            # result: wait for that here, as a later call would in practice.
            deadline = time.monotonic() + 5
            while not idle and time.monotonic() < deadline:
                time.sleep(0.001)
        assert server.connections == 1
        assert [r.connection for r in server.requests] == [1, 1, 1]
