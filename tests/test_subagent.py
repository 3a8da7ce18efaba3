"""subagent_tool: a fresh run per call, the recursion guard, approvals, usage and
the final text only."""

import pickle

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


def test_a_sub_agent_whose_approval_pauses_fails_the_call_instead_of_passing_its_text_off():
    ran = []

    @nacelle.tool
    def send(to: str) -> str:
        """Send something."""
        ran.append(to)
        return "sent"

    script = ScriptedBackend([
        assistant(ToolCall("p1", "subagent", '{"task": "tell ann"}')),
        assistant(Text("Sending it now."), ToolCall("s1", "send", '{"to": "ann"}')),
        assistant(Text("The sub-agent could not finish.")),
    ])
    helper = subagent_tool(Agent(script, "sys", tools=[send]),
                           approve=lambda *a: nacelle.PAUSE)
    result = Agent(script, "sys", tools=[helper]).run([user_text("tell ann")])
    (closed,) = result.messages[2].parts
    assert closed.failed and "paused for a person's approval of send" in closed.result
    assert "did not run" in closed.result and "Sending it now." not in closed.result
    assert ran == [] and result.text == "The sub-agent could not finish."


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
