"""evaluate: every case run ``repeat`` times through run_many, each run checked here;
failures with reasons; resuming from a results file without paying twice."""

import json
from concurrent.futures import ProcessPoolExecutor

import pytest

from nacelle import Agent
from nacelle.errors import ConfigError
from nacelle.events import Usage
from nacelle.evals import Case, Dataset, contains, evaluate, max_turns
from nacelle.messages import Message, Role, Text
from nacelle.testing import ScriptedBackend, Turn

CASES = Dataset([
    Case("capital", "Capital of France?", expected="Paris"),
    Case("river", "River of Paris?", checks=[contains("Seine")]),
    Case("any", "Say anything."),
])


def priced(text, cost=0.001):
    return Turn(Message(Role.ASSISTANT, (Text(text),)), usage=Usage(100, 20, cost=cost, priced=True))


def test_each_case_runs_repeat_times_and_reports_its_rate_cost_and_tokens():
    backend = ScriptedBackend([priced("Paris"), priced("Lyon"), priced("Paris"),
                               priced("The Seine"), priced("The Seine"), priced("The Loire"),
                               priced("hi"), priced("hi"), priced("hi")])
    report = evaluate(Agent(backend, "Answer."), CASES, repeat=3, max_workers=1)
    assert len(backend.requests) == 9
    capital, river, anything = report.cases
    assert (capital.passes, capital.runs, river.passes, anything.passes) == (2, 3, 2, 3)
    assert capital.cost == pytest.approx(0.003) and capital.tokens == 360
    assert capital.failures == ({"attempt": 1, "reasons": ["equals(): expected Paris, got Lyon"],
                                 "text": "Lyon"},)
    assert river.failures[0]["reasons"] == ["contains('Seine'): 'Seine' not in 'The Loire'"]
    assert report.passes == 7 and report.runs == 9 and report.repeat == 3
    assert [c.name for c in report.failed] == ["capital", "river"]


def test_a_run_that_raises_is_a_failed_run_with_its_error_and_the_eval_goes_on():
    backend = ScriptedBackend([Turn(Message(Role.ASSISTANT, (Text("x"),)),
                                    error=RuntimeError("provider down")), "The Seine", "ok"])
    report = evaluate(Agent(backend, "Answer."), CASES, max_workers=1)
    assert report["capital"].failures[0]["reasons"] == [
        "the run failed: RuntimeError: provider down"]
    assert report["river"].passes == 1 and report["any"].passes == 1


def test_checks_run_here_while_the_runs_go_to_a_process_pool():
    seen = []
    dataset = [Case("one", "q", checks=[lambda r: seen.append(r.text) or True, max_turns(1)])]
    with ProcessPoolExecutor(2) as pool:
        report = evaluate(Agent(ScriptedBackend(["Paris"]), "Answer."), dataset, repeat=2,
                          executor=pool, max_workers=2)
    assert seen == ["Paris", "Paris"] and report["one"].passes == 2


class Stop(BaseException):
    pass


def test_an_interrupted_eval_resumes_from_its_results_file_running_only_the_rest(tmp_path):
    results = tmp_path / "runs.jsonl"
    checked = []

    def stops_at_the_fourth(r):
        checked.append(r.text)
        if len(checked) == 4:
            raise Stop()  # as Ctrl-C would, mid-eval
        return True

    dataset = Dataset([Case(f"case{i}", f"q{i}", checks=[stops_at_the_fourth]) for i in range(3)])
    first = ScriptedBackend([f"answer {i}" for i in range(6)])
    with pytest.raises(Stop):
        evaluate(Agent(first, "Answer."), dataset, repeat=2, results=results, max_workers=1)
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [line["index"] for line in lines] == [0, 1, 2]
    assert lines[0]["case"] == "case0" and lines[0]["checks"][0]["passed"] is True
    # A kill in the middle of the next write leaves a torn line: it is cut and run again.
    with open(results, "a") as handle:
        handle.write('{"index": 3, "case": "ca')
    again = ScriptedBackend([f"again {i}" for i in range(3)])
    report = evaluate(Agent(again, "Answer."), dataset, repeat=2, results=results,
                      max_workers=1)
    assert len(again.requests) == 3  # runs 3, 4 and 5 only
    assert report.runs == 6 and report.passes == 6
    assert [json.loads(line)["index"] for line in results.read_text().splitlines()] == [
        0, 1, 2, 3, 4, 5]
    done = ScriptedBackend([])
    assert evaluate(Agent(done, "Answer."), dataset, repeat=2, results=results) == report
    assert done.requests == []


def test_a_results_file_of_another_dataset_is_refused(tmp_path):
    results = tmp_path / "runs.jsonl"
    evaluate(Agent(ScriptedBackend(["Paris", "Seine", "x"]), "A."), CASES, results=results,
             max_workers=1)
    with pytest.raises(ConfigError, match="written for another dataset or repeat"):
        evaluate(Agent(ScriptedBackend([]), "A."), CASES, repeat=2, results=results)


def test_bad_arguments_are_config_errors():
    agent = Agent(ScriptedBackend([]), "A.")
    with pytest.raises(ConfigError, match="repeat"):
        evaluate(agent, CASES, repeat=0)
    with pytest.raises(ConfigError, match="run_many takes a nacelle.Agent"):
        evaluate(object(), CASES)
    with pytest.raises(ConfigError, match="two cases are named 'a'"):
        evaluate(agent, [Case("a", "x"), Case("a", "y")])


def test_an_eval_replayed_from_a_cassette_is_offline_and_gives_the_same_rates_every_time(tmp_path):
    from nacelle.backends import chat
    from nacelle.evals import assert_passes
    from nacelle.testing import Cassette, FakeServer, Reply
    from nacelle.testing.wire import openrouter_stream

    path = tmp_path / "evals.json"
    dataset = Dataset([Case("capital", "Capital of France?", expected="Paris"),
                       Case("river", "River of Paris?", checks=[contains("Seine")])])

    def rates(cassette, workers):
        backend = chat.Backend("sk-test-key-123", model="m", base_url=cassette.url)
        report = evaluate(Agent(backend, "One word."), dataset, repeat=2, max_workers=workers)
        # Which of two identical requests gets which recording is the threads' order;
        # what each case got is not.
        return report, [(c.name, c.passes, c.runs, c.tokens, [f["reasons"] for f in c.failures])
                        for c in report.cases]

    with FakeServer() as provider:  # one at a time, so the provider's order is the cases'
        provider.queue("/chat/completions", *[Reply(chunks=openrouter_stream([text]))
                                              for text in ("Paris", "Lyon", "Seine", "Seine")])
        with Cassette(path, upstream=provider.url) as cassette:
            _, recorded = rates(cassette, 1)
    assert recorded[0][1:3] == (1, 2) and recorded[1][1:3] == (2, 2)
    for _ in range(3):
        with Cassette(path) as cassette:  # replayed on 4 threads, in any order
            report, replayed = rates(cassette, 4)
        assert replayed == recorded
    assert_passes(report, min_rate=0.5)
    with pytest.raises(AssertionError, match="- capital: 1/2\n    run \\d: equals\\(\\): "
                                             "expected Paris, got Lyon"):
        assert_passes(report)


def test_a_line_that_is_not_a_whole_checked_run_is_run_again(tmp_path):
    results = tmp_path / "runs.jsonl"
    dataset = [Case("a", "q", checks=[contains("x")])]
    evaluate(Agent(ScriptedBackend(["x"]), "A."), dataset, results=results)
    line = json.loads(results.read_text())
    for bad in ({"cost": "free"}, {"passed": "yes"}, {"checks": [1]}, {"usage": {"input_tokens": -0.5}}):
        results.write_text(json.dumps({**line, **bad}) + "\n")
        again = ScriptedBackend(["x"])
        assert evaluate(Agent(again, "A."), dataset, results=results)["a"].passes == 1
        assert len(again.requests) == 1


def test_a_judges_dollars_are_reported_apart_from_the_agents():
    from nacelle.evals import judge

    verdict = Turn(Message(Role.ASSISTANT, (Text('{"reasoning": "fine", "passed": true}'),)),
                   usage=Usage(50, 10, cost=0.0005, priced=True))
    dataset = [Case("judged", "q", checks=[judge("Any answer.", ScriptedBackend([verdict] * 2))])]
    report = evaluate(Agent(ScriptedBackend([priced("a"), priced("b")]), "A."), dataset, repeat=2)
    assert report["judged"].passes == 2
    assert report.cost == pytest.approx(0.002) and report.check_cost == pytest.approx(0.001)
    assert str(report) == ("2/2 runs passed (100%, 95% CI 34%-100%) over 1 case, $0.0020, "
                           "240 tokens")
