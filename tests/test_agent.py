"""Agent: construction refusals, conversation checks, runs, cancellation, Result,
token counting and pickling — over ScriptedBackend with real tools."""

import _thread
import pickle
import threading
import time

import pytest

import nacelle
from nacelle import (
    Agent, Cancelled, Capabilities, ConfigError, Effort, Image, Kind, MCPServer, Message,
    Result, Role, Stop, Text, Thinking, ToolCall, ToolContext, Unsupported, Usage, user_text,
)
from nacelle.backend import TurnEnd
from nacelle.events import Event
from nacelle.testing import ScriptedBackend, Turn

NONE = Capabilities()


@nacelle.tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


@nacelle.tool
def wait_for_cancel(ctx: ToolContext) -> str:
    """Block until the call is cancelled."""
    ctx.cancelled.wait(10)
    return "stopped"


def assistant(*parts):
    return Message(Role.ASSISTANT, parts)


def backend(turns=(), capabilities=None):
    if capabilities is None:
        return ScriptedBackend(turns)
    return ScriptedBackend(turns, capabilities=capabilities)


class NamedTool:
    description = "d"
    schema = {"type": "object", "properties": {}}

    def __init__(self, name, schema=None):
        self.name = name
        if schema is not None:
            self.schema = schema

    def run(self, input, ctx):
        return ""


# -- construction refusals ---------------------------------------------------------

def test_an_agent_without_a_backend_is_refused():
    with pytest.raises(ConfigError, match="needs a backend"):
        Agent(None, "sys")


def test_an_object_that_is_not_a_backend_is_refused():
    with pytest.raises(ConfigError, match="not a Backend"):
        Agent(object(), "sys")


def test_a_backend_that_offers_a_whole_run_but_no_turn_is_refused():
    class WholeRun:
        name = "old"
        capabilities = NONE

        def stream(self, request, ctx):
            return iter(())

    with pytest.raises(ConfigError, match="no 'turn'"):
        Agent(WholeRun(), "sys")


@pytest.mark.parametrize("system", ["", "   ", None])
def test_an_empty_system_prompt_is_refused(system):
    with pytest.raises(ConfigError, match="system prompt"):
        Agent(backend(), system)


def test_duplicate_tool_names_are_refused():
    with pytest.raises(ConfigError, match="two tools are named 'lookup'"):
        Agent(backend(), "sys", tools=[lookup, NamedTool("lookup")])


@pytest.mark.parametrize("name", ["has space", "", "x" * 65, "dot.ted", "ünï"])
def test_a_tool_name_the_providers_reject_is_refused(name):
    with pytest.raises(ConfigError, match="must match"):
        Agent(backend(), "sys", tools=[NamedTool(name)])


@pytest.mark.parametrize("schema", [{"type": "string"}, {"properties": {}}, ["type", "object"]])
def test_a_schema_that_is_not_a_json_object_schema_is_refused(schema):
    with pytest.raises(ConfigError, match="JSON object schema"):
        Agent(backend(), "sys", tools=[NamedTool("t", schema)])


def test_something_that_is_not_a_tool_is_refused():
    with pytest.raises(ConfigError, match="is not a Tool"):
        Agent(backend(), "sys", tools=[lambda: "x"])


def test_mcp_servers_on_a_backend_without_mcp_are_unsupported_and_point_to_the_local_client():
    with pytest.raises(Unsupported) as raised:
        Agent(backend(capabilities=NONE), "sys", mcp=[MCPServer("m", "https://example.com/mcp")])
    assert raised.value.backend == "scripted" and "MCP" in raised.value.feature
    assert "nacelle.mcp.connect_http" in str(raised.value)


def test_show_thinking_without_thinking_is_unsupported():
    with pytest.raises(Unsupported, match="thinking"):
        Agent(backend(capabilities=NONE), "sys", thinking=Thinking(show=True))


def test_a_thinking_budget_without_thinking_is_unsupported():
    with pytest.raises(Unsupported, match="budget"):
        Agent(backend(capabilities=NONE), "sys", thinking=Thinking(budget=2048))


@pytest.mark.parametrize("effort", [Effort.NONE, Effort.HIGH])
def test_any_effort_without_effort_support_is_unsupported(effort):
    with pytest.raises(Unsupported, match="effort"):
        Agent(backend(capabilities=Capabilities(thinking=True)), "sys", thinking=Thinking(effort=effort))


def test_a_thinking_budget_below_the_minimum_is_unsupported():
    caps = Capabilities(thinking=True, min_budget=1024)
    with pytest.raises(Unsupported, match="minimum is 1024"):
        Agent(backend(capabilities=caps), "sys", thinking=Thinking(budget=1000))
    Agent(backend(capabilities=caps), "sys", thinking=Thinking(budget=1024))


def test_a_thinking_budget_not_below_max_tokens_is_refused():
    with pytest.raises(ConfigError, match="below max_tokens"):
        Agent(backend(), "sys", thinking=Thinking(budget=4000), max_tokens=4000)


@pytest.mark.parametrize("option, value", [
    ("max_tokens", 0), ("max_iterations", -1), ("max_parallel_tools", 0), ("tool_timeout", 0),
    ("tool_timeout", -1.0), ("approve", "yes"), ("hooks", {"sometime": []}), ("thinking", "high"),
    ("max_iterations", True),
])
def test_bad_options_are_refused(option, value):
    with pytest.raises(ConfigError):
        Agent(backend(), "sys", **{option: value})


def test_the_callers_tool_list_and_hooks_are_copied():
    tools = [lookup]
    hooks = {"before_tool_call": []}
    agent = Agent(backend(), "sys", tools=tools, hooks=hooks)
    tools.append(NamedTool("later"))
    hooks["after_tool_call"] = [print]
    assert [t.name for t in agent.tools] == ["lookup"]
    assert nacelle.HookPoint.AFTER_TOOL_CALL not in agent.hooks


# -- conversations ----------------------------------------------------------------

class GrowingToolset:
    """A toolset that is iterable too, as ``client.tools(live=True)`` is: calling
    ``grow`` adds ``lookup`` to its list."""

    def __init__(self):
        self.grown = False

        @nacelle.tool(name="grow")
        def grow() -> str:
            """Add a tool."""
            self.grown = True
            return "grown"

        self.grow = grow

    def current(self):
        return [self.grow, lookup] if self.grown else [self.grow]

    def __iter__(self):
        return iter(self.current())


def test_a_bare_toolset_given_as_tools_is_one_toolset_asked_each_turn_not_a_snapshot():
    toolset = GrowingToolset()
    scripted = backend([assistant(ToolCall("a", "grow", "{}")),
                        assistant(ToolCall("b", "lookup", '{"key": "k"}')),
                        assistant(Text("done"))])
    agent = Agent(scripted, "sys", tools=toolset)
    assert agent.tools == (toolset,)
    events = list(agent.stream([user_text("go")]))
    assert [[t.name for t in r.tools] for r in scripted.requests] == [
        ["grow"], ["grow", "lookup"], ["grow", "lookup"]]
    results = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert [(r.result, r.error) for r in results] == [("grown", None), ("K", None)]


def test_an_image_on_a_backend_without_images_is_unsupported_before_any_request():
    scripted = backend([assistant(Text("hi"))], capabilities=NONE)
    agent = Agent(scripted, "sys")
    picture = Message(Role.USER, (Text("look"), Image("image/png", "iVBORw0KGgo=")))
    with pytest.raises(Unsupported, match="images"):
        agent.stream([picture])
    assert scripted.requests == []


def test_an_image_on_a_backend_with_images_is_sent():
    scripted = backend([assistant(Text("a cat"))])
    picture = Message(Role.USER, (Image("image/png", "iVBORw0KGgo="),))
    assert Agent(scripted, "sys").run([picture]).text == "a cat"


def test_a_document_on_a_backend_without_documents_is_unsupported_before_any_request():
    scripted = backend([assistant(Text("hi"))], capabilities=Capabilities(images=True))
    paper = Message(Role.USER, (Text("read"), nacelle.Document("application/pdf", "JVBERi0=")))
    with pytest.raises(Unsupported, match=r"documents \(conversation\[1\] has one\)"):
        Agent(scripted, "sys").stream([user_text("first"), paper])
    assert scripted.requests == []


def test_a_document_on_a_backend_with_documents_is_sent():
    scripted = backend([assistant(Text("a paper"))])
    paper = Message(Role.USER, (nacelle.Document("text/plain", "aGk=", "notes"),))
    assert Agent(scripted, "sys").run([paper]).text == "a paper"
    assert scripted.requests[0].messages == (paper,)


def test_a_tools_image_on_a_backend_without_images_is_no_refusal():
    @nacelle.tool
    def shot() -> Image:
        """A screenshot."""
        return Image("image/png", "iVBORw0KGgo=")

    scripted = backend([assistant(ToolCall("c1", "shot", "{}")), assistant(Text("seen"))],
                       capabilities=NONE)
    result = Agent(scripted, "sys", tools=[shot]).run([user_text("look")])
    assert result.text == "seen"
    assert scripted.requests[1].messages[-1].parts[0].content == (
        Image("image/png", "iVBORw0KGgo="),)


def test_a_conversation_item_that_is_not_a_message_is_refused():
    with pytest.raises(ConfigError, match=r"conversation\[1\]"):
        Agent(backend(), "sys").stream([user_text("a"), "b"])


# -- runs ------------------------------------------------------------------------

def test_run_returns_the_final_text_conversation_usage_stop_and_turns():
    scripted = backend([
        Turn(assistant(Text("checking"), ToolCall("c", "lookup", '{"key": "k"}')), usage=Usage(5, 1)),
        Turn(assistant(Text("It is K.")), usage=Usage(7, 2, cost=0.5)),
    ])
    result = Agent(scripted, "sys", tools=[lookup]).run([user_text("what is k?")])
    assert isinstance(result, Result)
    assert result.text == "It is K." and result.stop is Stop.END and result.turns == 2
    assert result.usage == Usage(12, 3, cost=0.5) and len(result.messages) == 4
    assert "turns=2" in repr(result) and "It is K." in repr(result)
    assert result._repr_markdown_().startswith("It is K.") and "2 turns" in result._repr_markdown_()


def test_an_agent_is_reusable_and_each_request_carries_its_configuration():
    scripted = backend([assistant(Text("one")), assistant(Text("two"))])
    agent = Agent(scripted, "Be brief.", tools=[lookup], max_iterations=3, max_tokens=100)
    assert agent.run([user_text("1")]).text == "one"
    assert agent.run([user_text("2")]).text == "two"
    first = scripted.requests[0]
    assert first.system == "Be brief." and first.tools == (lookup,) and first.max_tokens == 100
    assert scripted.requests[1].messages == (user_text("2"),)


def test_an_agent_is_shared_between_threads():
    scripted = backend([assistant(Text("same")) for _ in range(4)])
    agent = Agent(scripted, "sys")
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(agent.run([user_text("q")]).text))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert answers == ["same"] * 4


def test_a_pickled_agent_runs():
    scripted = backend([assistant(ToolCall("c", "lookup", '{"key": "p"}')), assistant(Text("P"))])
    agent = Agent(scripted, "sys", tools=[lookup], thinking=Thinking(effort=Effort.LOW))
    copy = pickle.loads(pickle.dumps(agent))
    assert copy.tools[0] is lookup
    result = copy.run([user_text("go")])
    assert result.text == "P" and result.messages[2].parts[0].result == "P"


def test_count_tokens_counts_the_request_stream_would_send():
    agent = Agent(backend(), "sys", tools=[lookup])
    assert agent.count_tokens([user_text("hello " * 40)]) > agent.count_tokens([user_text("hi")]) > 0


def test_count_tokens_without_support_is_unsupported():
    with pytest.raises(Unsupported, match="token counting"):
        Agent(backend(capabilities=NONE), "sys").count_tokens([user_text("hi")])


class OnlyATurn:
    """A user's own backend: ``name``, ``capabilities`` and ``turn``, nothing more."""

    name = "mine"
    capabilities = NONE

    def __init__(self):
        self.seen = []

    def turn(self, request, messages, ctx):
        self.seen.append((request.system, messages))
        if len(messages) == 1:
            yield TurnEnd((ToolCall("c1", "lookup", '{"key": "oslo"}'),), Usage(3, 1), Stop.TOOLS)
        else:
            yield Event(Kind.TEXT, text="Sunny.")
            yield TurnEnd((Text("Sunny."),), Usage(5, 2), Stop.END)


def test_a_users_backend_with_only_a_turn_runs_tools_and_answers():
    mine = OnlyATurn()
    agent = Agent(mine, "sys", tools=[lookup])
    events = list(agent.stream([user_text("weather?")]))
    assert [e.kind for e in events] == [Kind.TOOL_CALL, Kind.TURN, Kind.TOOL_RESULT,
                                        Kind.TEXT, Kind.TURN, Kind.DONE]
    done = events[-1]
    assert done.stop is Stop.END and done.usage == Usage(8, 3)
    assert [len(messages) for _, messages in mine.seen] == [1, 3]
    assert mine.seen[1][1][2].parts[0].result == "OSLO"
    with pytest.raises(Unsupported, match="token counting"):
        agent.count_tokens([user_text("weather?")])


def test_a_users_backend_with_only_a_turn_runs_under_retry_and_fallback():
    agent = Agent(nacelle.Retry(nacelle.Fallback([OnlyATurn()])), "sys", tools=[lookup])
    result = agent.run([user_text("weather?")])
    assert result.text == "Sunny." and result.turns == 2


# -- cancellation ----------------------------------------------------------------

@pytest.mark.slow
def test_setting_cancel_from_another_thread_ends_a_run_blocked_on_a_slow_tool():
    cancel = threading.Event()
    scripted = backend([assistant(ToolCall("c", "wait_for_cancel", "{}")), assistant(Text("never"))])
    agent = Agent(scripted, "sys", tools=[wait_for_cancel])
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        for _ in agent.stream([user_text("go")], cancel=cancel):
            pass
    assert time.monotonic() - started < 1.5
    assert len(scripted.requests) == 1


@pytest.mark.slow
def test_setting_cancel_ends_a_run_blocked_waiting_for_the_model():
    cancel = threading.Event()
    scripted = backend([Turn(assistant(Text("slow")), delay=10)])
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        Agent(scripted, "sys").run([user_text("go")], cancel=cancel)
    assert time.monotonic() - started < 1.5


def test_the_callers_cancel_event_is_only_watched():
    cancel = threading.Event()
    result = Agent(backend([assistant(Text("hi"))]), "sys").run([user_text("go")], cancel=cancel)
    assert result.text == "hi" and not cancel.is_set()


def watchers():
    return [t for t in threading.enumerate() if t.name == "nacelle-cancel-watch"]


@pytest.mark.slow
def test_a_cancel_event_of_nacelles_wakes_the_run_by_callback_with_no_watcher_thread():
    cancel = nacelle.CancelEvent()
    scripted = backend([Turn(assistant(Text("slow")), delay=10)])
    seen = []

    def set_cancel():
        seen.append(watchers())
        cancel.set()

    threading.Timer(0.2, set_cancel).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        Agent(scripted, "sys").run([user_text("go")], cancel=cancel)
    assert time.monotonic() - started < 1.5
    assert seen == [[]] and cancel._callbacks == {}


def test_a_finished_run_leaves_no_callback_on_the_callers_cancel_event():
    cancel = nacelle.CancelEvent()
    agent = Agent(backend([assistant(Text("a")), assistant(Text("b"))]), "sys")
    agent.run([user_text("go")], cancel=cancel)
    agent.run([user_text("go")], cancel=cancel)
    assert cancel._callbacks == {} and not cancel.is_set()


def test_a_subagent_call_follows_its_parent_by_callback_not_by_a_watcher_thread():
    inner_seen = []

    @nacelle.tool
    def look(ctx: ToolContext) -> str:
        """Records the watcher threads this run started, alive while the nested run works."""
        inner_seen.append([t for t in watchers() if t not in before])
        return "looked"

    child = Agent(backend([assistant(ToolCall("i", "look", "{}")), assistant(Text("inner done"))]),
                  "child", tools=[look])
    parent = Agent(backend([assistant(ToolCall("p", "subagent", '{"task": "look"}')),
                            assistant(Text("outer done"))]),
                   "parent", tools=[nacelle.subagent_tool(child, approve=lambda *a: True)])
    before = watchers()  # an earlier test's watcher may still be ending its last poll
    assert parent.run([user_text("go")]).text == "outer done"
    assert inner_seen == [[]]


def test_a_cancel_event_set_before_the_run_cancels_it_before_any_request():
    cancel = threading.Event()
    cancel.set()
    scripted = backend([assistant(Text("hi"))])
    with pytest.raises(Cancelled):
        Agent(scripted, "sys").run([user_text("go")], cancel=cancel)
    assert scripted.requests == []


@pytest.mark.slow
def test_keyboard_interrupt_while_waiting_propagates_after_cancelling_tools():
    saw_cancel = threading.Event()

    @nacelle.tool
    def slow(ctx: ToolContext) -> str:
        """Wait to be cancelled."""
        if ctx.cancelled.wait(10):
            saw_cancel.set()
        return "x"

    scripted = backend([assistant(ToolCall("c", "slow", "{}")), assistant(Text("never"))])
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            Agent(scripted, "sys", tools=[slow]).run([user_text("go")])
    finally:
        timer.cancel()
    assert saw_cancel.wait(1)


def test_a_backend_turn_error_is_raised_from_the_stream():
    scripted = backend([Turn(assistant(Text("partial")), error=nacelle.StreamTruncated("cut"))])
    stream = Agent(scripted, "sys").stream([user_text("go")])
    assert next(stream).text == "partial"
    with pytest.raises(nacelle.StreamTruncated):
        next(stream)


def test_a_failing_tool_is_not_a_stream_error():
    @nacelle.tool
    def broken() -> str:
        """Fails."""
        raise RuntimeError("nope")

    scripted = backend([assistant(ToolCall("c", "broken", "{}")), assistant(Text("sorry"))])
    result = Agent(scripted, "sys", tools=[broken]).run([user_text("go")])
    assert result.text == "sorry" and result.messages[2].parts[0].failed


def test_repr_names_the_backend_and_tools():
    assert repr(Agent(backend(), "sys", tools=[lookup])) == (
        "Agent(backend='scripted', tools=['lookup'], mcp=[], max_iterations=50)")


def test_events_reach_the_consumer_as_the_turn_streams():
    agent = Agent(backend([assistant(Text("a"), Text("b"))]), "sys")
    assert [e.text for e in agent.stream([user_text("go")]) if e.kind is Kind.TEXT] == ["a", "b"]


# -- notebook view -------------------------------------------------------------------

def test_the_html_view_of_a_result_escapes_the_answer_and_folds_the_tool_calls():
    scripted = backend([
        Turn(assistant(ToolCall("c", "lookup", '{"key": "<k>"}')), usage=Usage(5, 1)),
        Turn(assistant(Text("It is <script>K</script>.")), usage=Usage(7, 2, cost=0.5)),
    ])
    view = Agent(scripted, "sys", tools=[lookup]).run([user_text("k?")])._repr_html_()
    assert "<script>" not in view and "It is &lt;script&gt;K&lt;/script&gt;." in view
    assert "end · 2 turns · 15 tokens (in 12, out 3, cache read 0, cache write 0) · $0.5000" in view
    assert "1 tool call<details><summary>lookup &middot; ok</summary>" in view
    assert "{&quot;key&quot;: &quot;&lt;k&gt;&quot;}" in view and "<pre>&lt;K&gt;</pre>" in view


def test_the_html_view_of_an_incomplete_result_is_marked():
    result = Result("partial", (), Usage(1, 2), Stop.MAX_TOKENS, 1)
    view = result._repr_html_()
    assert 'style="color:#d0453a"' in view and "max_tokens" in view and "details" not in view


@nacelle.tool
def five_megabytes() -> str:
    """Returns 5 MB of text."""
    return "z" * 5_000_000


def test_a_five_megabyte_result_reaches_the_model_cut_to_100_000_characters_with_a_note():
    turns = [assistant(ToolCall("a", "five_megabytes", "{}")), assistant(Text("done"))]
    scripted = backend(turns)
    result = Agent(scripted, "Test.", tools=[five_megabytes]).run([user_text("go")])
    sent = scripted.requests[1].messages[-1].parts[0].result
    assert sent.startswith("z" * 100_000 + "\n\n[") and len(sent) < 100_200
    assert "4,900,000" in sent and result.text == "done"
    uncut = backend(turns)
    Agent(uncut, "Test.", tools=[five_megabytes], max_result_chars=0).run([user_text("go")])
    assert uncut.requests[1].messages[-1].parts[0].result == "z" * 5_000_000


@pytest.mark.parametrize("bad", [-1, 1.5, True, "100"])
def test_max_result_chars_must_be_a_whole_number_of_at_least_zero(bad):
    with pytest.raises(ConfigError, match="max_result_chars"):
        Agent(backend(), "Test.", max_result_chars=bad)


def test_the_typed_overloads_of_agent_name_every_option_of_its_signature():
    # Agent's overloads take the options but output= as **_Options, so an option
    # added to the signature and not there would be refused by a user's type checker.
    import inspect
    import typing

    from nacelle.agent import _Options

    parameters = inspect.signature(nacelle.Agent.__init__).parameters
    options = {n for n, p in parameters.items() if p.kind is p.KEYWORD_ONLY} - {"output"}
    assert set(typing.get_type_hints(_Options)) == options == set(_Options.__annotations__)


# -- model settings and the prompt cache ----------------------------------------------

def test_the_agents_model_settings_and_cache_ride_in_every_request():
    settings = nacelle.ModelSettings(temperature=0.2, tool_choice="lookup")
    cache = nacelle.Cache(ttl="1h", key="k1")
    agent = Agent(backend(), "s", tools=[lookup], model_settings=settings, cache=cache)
    request = agent.request([user_text("hi")])
    assert request.settings is settings and request.cache is cache
    plain = Agent(backend(), "s").request([])
    assert plain.settings == nacelle.ModelSettings() and plain.cache is None


def test_a_setting_the_backend_does_not_take_is_unsupported_at_construction():
    caps = Capabilities(settings=frozenset({"temperature"}))
    Agent(backend(capabilities=caps), "s", model_settings=nacelle.ModelSettings(temperature=1))
    with pytest.raises(Unsupported, match="does not support the seed setting"):
        Agent(backend(capabilities=caps), "s", model_settings=nacelle.ModelSettings(seed=3))
    with pytest.raises(Unsupported, match="the cache_key setting"):
        Agent(backend(capabilities=caps), "s", cache=nacelle.Cache(key="k"))
    # a user's backend that declares no settings takes none of them
    with pytest.raises(Unsupported, match="the stop setting"):
        Agent(backend(capabilities=Capabilities()), "s",
              model_settings=nacelle.ModelSettings(stop="END"))


def test_a_forced_tool_choice_must_name_a_tool_the_agent_has():
    with pytest.raises(ConfigError, match="tool_choice names 'missing'"):
        Agent(backend(), "s", tools=[lookup],
              model_settings=nacelle.ModelSettings(tool_choice="missing"))
    with pytest.raises(ConfigError, match="the Agent has no tools"):
        Agent(backend(), "s", model_settings=nacelle.ModelSettings(tool_choice="required"))
    Agent(backend(), "s", tools=[lookup], model_settings=nacelle.ModelSettings(
        tool_choice="required", parallel_tool_calls=False))
    Agent(backend(), "s", model_settings=nacelle.ModelSettings(tool_choice="none"))


@pytest.mark.parametrize("options, match", [
    ({"model_settings": {"temperature": 0}}, "model_settings must be a nacelle.ModelSettings"),
    ({"cache": "1h"}, "cache must be a nacelle.Cache"),
])
def test_settings_of_the_wrong_type_are_config_errors(options, match):
    with pytest.raises(ConfigError, match=match):
        Agent(backend(), "s", **options)
