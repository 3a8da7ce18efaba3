"""The run report: a run recorded through a FakeServer, rendered, and checked in pure
Python (escaping, a failed request, several runs, a torn line) and in a real headless
Chromium driven over its DevTools protocol (no console errors, no network, tool bars
to scale, screenshots at 1280 and 390 px saved under NACELLE_ARTIFACTS)."""

import base64
import json
import re
import time

import pytest

import nacelle
from nacelle import report
from nacelle.backends import anthropic
from nacelle.observe import Recorder
from nacelle.testing.server import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

from browser import artifacts, chromium, launched, png

HOSTILE = '<script>alert("x")</script><img src=http://evil.example/x.png onerror=alert(1)>'
SLOW, QUICK = 0.3, 0.1


@nacelle.tool
def slow(seconds: float) -> str:
    """Sleep for a while."""
    time.sleep(seconds)
    return f"slept {seconds}"


@nacelle.tool
def quick(text: str) -> str:
    """Echo the text, <b>late</b>."""
    time.sleep(QUICK)
    return HOSTILE + text


def record_run(path, *, fail=False):
    """Two turns: the first retried once after a 529 and asking for two tools at once."""
    overloaded = Reply(status=529, content_type="application/json", chunks=[
        b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'])
    first = Reply(chunks=anthropic_stream(
        ["Running ", "both."], tool_calls=[("t1", "slow", json.dumps({"seconds": SLOW})),
                                           ("t2", "quick", '{"text": "hi"}')],
        usage={"input_tokens": 100, "output_tokens": 30, "cache_creation_input_tokens": 2000}))
    if fail:
        last = Reply(status=400, content_type="application/json", chunks=[
            b'{"type":"error","error":{"type":"invalid_request_error","message":"<b>bad</b>"}}'])
    else:
        last = Reply(chunks=anthropic_stream(
            ["Done: ", HOSTILE], usage={"input_tokens": 50, "output_tokens": 20,
                                        "cache_read_input_tokens": 2000}))
    with FakeServer() as server:
        server.queue("/v1/messages", overloaded, first, last)
        backend = anthropic.Backend(api_key="sk-test", base_url=server.url, max_retries=2)
        with Recorder(path) as recorder:
            agent = nacelle.Agent(backend, "Be brief.", tools=[slow, quick],
                                  observers=[recorder])
            try:
                agent.run([nacelle.user_text("Run both " + HOSTILE)])
            except nacelle.APIError:
                assert fail
    return path


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    return record_run(tmp_path_factory.mktemp("report") / "run.jsonl")


def tool_bars(page):
    return re.findall(r'<span class="bar tool[^"]*" data-duration="([\d.]+)" '
                      r'style="left:([\d.]+)%;width:([\d.]+)%"', page)


# -- the page, in Python ----------------------------------------------------------------


@pytest.mark.slow
def test_a_run_shows_each_tool_call_as_a_bar_sized_by_its_duration(recording):
    page = report.html(recording)
    bars = sorted(tool_bars(page), key=lambda b: float(b[0]))
    assert len(bars) == 2
    (quick_s, _, quick_w), (slow_s, _, slow_w) = bars
    assert float(quick_s) >= QUICK and float(slow_s) >= SLOW
    assert float(slow_w) / float(quick_w) == pytest.approx(float(slow_s) / float(quick_s), rel=1e-3)


def test_tool_calls_that_overlapped_get_lanes_of_their_own(recording):
    page = report.html(recording)
    assert page.count('class="row tool-lane"') == 2
    assert page.count('class="row request-lane"') == 2


def test_the_retry_and_the_time_to_first_token_are_marked(recording):
    page = report.html(recording)
    assert page.count('class="retry"') == 1 and "overloaded_error" in page
    assert page.count('class="ttft"') == 2


def test_hostile_text_from_the_recording_is_escaped_everywhere(recording):
    page = report.html(recording)
    assert "<script" not in page and "<img" not in page and "evil.example/x.png onerror" in page
    assert "&lt;script&gt;" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_the_token_table_shows_each_turn_and_what_the_cache_saved(recording):
    page = report.html(recording)
    assert "<td>2,000</td>" in page
    # Opus at $5/M input: 2,000 cached reads at a tenth of the rate save $0.009, and
    # 2,000 writes at 1.25x cost $0.0025 more than plain input.
    assert "$0.0090" in page and "-$0.0025" in page and "$0.0065" in page


def test_the_page_is_self_contained(recording):
    page = report.html(recording)
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)
    assert "@import" not in page and "url(" not in page and "<script" not in page


@pytest.mark.slow
def test_a_failed_request_is_drawn_red_and_the_transcript_comes_from_the_stream(tmp_path):
    page = report.html(record_run(tmp_path / "failed.jsonl", fail=True))
    assert 'class="bar request failed"' in page
    assert "raised APIError" in page and "&lt;b&gt;bad&lt;/b&gt;" in page
    assert "did not finish" in page and "slept 0.3" in page


@pytest.mark.slow
def test_a_file_of_several_runs_shows_each_or_the_one_asked_for(tmp_path, recording):
    path = tmp_path / "two.jsonl"
    path.write_bytes(recording.read_bytes())
    record_run(path)
    ids = list(dict.fromkeys(r["run_id"] for r in nacelle.observe.load(path)))
    assert len(ids) == 2
    both = report.html(path)
    assert both.count('<section class="run"') == 2 and "2 runs" in both
    one = report.html(path, run_id=ids[1])
    assert one.count('<section class="run"') == 1 and ids[1] in one and ids[0] not in one
    with pytest.raises(ValueError, match="no run 'nope'"):
        report.html(path, run_id="nope")


def test_a_torn_last_line_is_skipped(tmp_path, recording, caplog):
    path = tmp_path / "torn.jsonl"
    path.write_bytes(recording.read_bytes() + b'{"kind":"tool.start","run_id":"x","ti')
    page = report.html(path)
    assert page.count('<section class="run"') == 1 and len(tool_bars(page)) == 2
    assert "cut short" in caplog.text


def test_hostile_record_values_do_not_break_the_page(tmp_path):
    path = tmp_path / "odd.jsonl"
    lines = [{"kind": "run.start", "run_id": HOSTILE, "time": 1.0, "data": {"model": HOSTILE}},
             {"kind": "request.start", "run_id": HOSTILE, "time": 1.0, "data": {"span": [1]}},
             {"kind": "request.end", "run_id": HOSTILE, "time": 2.0, "data": {"usage": "x"}},
             {"kind": "tool.start", "run_id": HOSTILE, "time": 1.5, "data": {"span": 2}},
             {"kind": "event", "run_id": HOSTILE, "time": 2.0, "data": {"event": [1, 2]}},
             {"kind": "run.end", "run_id": HOSTILE, "time": 2.0, "data": {"usage": {"cost": -1}}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    page = report.html(path)
    assert "<script" not in page and "<img" not in page and "did not finish" in page


@pytest.mark.slow
def test_a_long_streamed_answer_is_joined_once_not_copied_at_every_delta(tmp_path):
    path, deltas = tmp_path / "long.jsonl", 150_000
    lines = [{"kind": "run.start", "run_id": "r", "time": 1.0, "data": {"messages": []}}]
    lines += [{"kind": "event", "run_id": "r", "time": 1.0 + i / deltas,
               "data": {"event": {"kind": "text", "text": f"{i % 10}" * 30}}}
              for i in range(deltas)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    started = time.monotonic()
    page = report.html(path)
    # About a second; adding each delta to the text so far took half a minute here.
    assert time.monotonic() - started < 10
    assert "".join(f"{i % 10}" * 30 for i in range(deltas)) in page


def test_write_saves_the_page(tmp_path, recording):
    out = tmp_path / "run.html"
    report.write(recording, out)
    assert out.read_text(encoding="utf-8") == report.html(recording)


# -- the page, in a browser -------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary = chromium()
    if binary is None:
        pytest.skip("no Chromium binary on PATH (chromium, chromium-browser, google-chrome): "
                    "install Debian's chromium package to run the browser checks")
    # Nothing but the page itself may load: even loopback goes to the dead proxy.
    with launched(binary, tmp_path_factory.mktemp("chromium-profile"), "<-loopback>") as page:
        yield page



BARS = """JSON.stringify([...document.querySelectorAll('.bar.tool')].map(b => [
  parseFloat(b.dataset.duration), b.getBoundingClientRect().width]))"""


@pytest.mark.slow
@pytest.mark.parametrize("width,mobile", [(1280, False), (390, True)])
def test_the_page_renders_in_chromium_offline_with_bars_to_scale(browser, recording, tmp_path,
                                                                 width, mobile):
    page = tmp_path / "run.html"
    report.write(recording, page)
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=width, height=900,
                 deviceScaleFactor=1, mobile=mobile)
    browser.load(page.as_uri())
    browser.evaluate("1")  # drains what arrived before the load event's reply

    errors = [m for m in browser.events if m.get("method") in ("Runtime.exceptionThrown",
              "Network.loadingFailed") or (m.get("method") == "Runtime.consoleAPICalled"
              and m["params"]["type"] in ("error", "assert")) or (
              m.get("method") == "Log.entryAdded" and m["params"]["entry"]["level"] == "error")]
    assert errors == []
    requests = [m["params"]["request"]["url"] for m in browser.events
                if m.get("method") == "Network.requestWillBeSent"]
    assert requests == [page.as_uri()]

    bars = json.loads(browser.evaluate(BARS))
    assert len(bars) == 2
    (short, short_px), (long, long_px) = sorted(bars)
    assert long > short > 0 and short_px > 10
    assert long_px / short_px == pytest.approx(long / short, rel=0.05)
    assert browser.evaluate("document.documentElement.scrollWidth") <= width

    size = browser.call("Page.getLayoutMetrics")["cssContentSize"]
    shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": width,
                              "height": min(size["height"], 4000), "scale": 1})
    out = artifacts() / f"report-{width}.png"
    out.write_bytes(base64.b64decode(shot["data"]))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- images and documents ---------------------------------------------------------------


PNG64 = base64.b64encode(png()).decode()
PDF64 = base64.b64encode(b"%PDF-1.4\n%%EOF\n").decode()


def media_recording(path, user_parts, tool_content, streamed_content=None):
    """A run whose DONE conversation holds ``user_parts`` and a tool result carrying
    ``tool_content``; with ``streamed_content`` the run has no DONE, and its stream's
    TOOL_RESULT (a Recorder's shape: dataclass fields, no ``type``) carries it."""
    lines = [{"kind": "run.start", "run_id": "r", "time": 1.0, "data": {"messages": [
        {"role": "user", "parts": user_parts}]}}]
    if streamed_content is None:
        messages = [{"role": "user", "parts": user_parts},
                    {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1",
                                                     "name": "shot", "input": "{}"}]},
                    {"role": "user", "parts": [{"type": "tool_result", "id": "c1", "name": "shot",
                                                "result": "the page", "content": tool_content}]}]
        lines.append({"kind": "event", "run_id": "r", "time": 2.0,
                      "data": {"event": {"kind": "done", "messages": messages}}})
    else:
        lines.append({"kind": "event", "run_id": "r", "time": 2.0, "data": {"event": {
            "kind": "tool_result", "tool": {"id": "c1", "name": "shot", "result": "the page",
                                            "content": streamed_content}}}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_images_are_shown_and_documents_linked_by_their_title_with_their_size(tmp_path):
    path = media_recording(
        tmp_path / "media.jsonl",
        [{"type": "text", "text": "Read this."},
         {"type": "document", "media_type": "application/pdf", "data": PDF64, "title": "Q3 report"}],
        [{"type": "text", "text": "the page"},
         {"type": "image", "media_type": "image/png", "data": PNG64}])
    page = report.html(path)
    assert page.count("<img ") == 1
    assert f'<img src="data:image/png;base64,{PNG64}" alt="image image/png, {len(png()):,} bytes">' \
        in page
    assert (f'<a href="data:application/pdf;base64,{PDF64}" download="Q3 report.pdf">Q3 report</a>'
            in page)
    assert f"application/pdf, {len(b'%PDF-1.4' + bytes(7)):,} bytes" in page


def test_a_streamed_tool_result_shows_its_media_from_the_recorded_fields(tmp_path):
    path = media_recording(tmp_path / "streamed.jsonl", [{"type": "text", "text": "Look."}], None,
                           streamed_content=[{"text": "the page"},
                                             {"media_type": "image/png", "data": PNG64},
                                             {"media_type": "text/plain", "data": "aGk=",
                                              "title": "notes"}])
    page = report.html(path)
    assert f'src="data:image/png;base64,{PNG64}"' in page
    assert 'download="notes.txt">notes</a> <span class="tag">text/plain, 2 bytes</span>' in page


@pytest.mark.parametrize("part", [
    {"type": "image", "media_type": "image/svg+xml", "data": "PHN2Zz4="},
    {"type": "image", "media_type": 'image/png" onerror="alert(1)', "data": PNG64},
    {"type": "image", "media_type": "image/png", "data": 'x" onerror="alert(1)'},
    {"type": "image", "media_type": "text/html", "data": "PHNjcmlwdD4="},
    {"type": "document", "media_type": "text/html", "data": "PHNjcmlwdD4=", "title": HOSTILE},
    {"type": "document", "media_type": "application/pdf", "data": "<b>", "title": HOSTILE},
    {"type": "document", "media_type": "application/pdf", "data": PDF64,
     "title": '"><script>alert(1)</script>'},
])
def test_media_with_a_hostile_type_title_or_data_is_named_never_run(tmp_path, part):
    page = report.html(media_recording(tmp_path / "odd.jsonl", [part], [part]))
    assert "<script" not in page and not any("onerror" in tag for tag in re.findall("<[^>]*>", page))
    assert "data:image/svg" not in page and "data:text/html" not in page
    images = re.findall(r"<img [^>]*>", page)
    assert all(re.fullmatch(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]+" alt="[^"<>]*">', i)
               for i in images)
    links = re.findall(r'<a [^>]*>', page)
    assert all(re.fullmatch(r'<a href="data:application/pdf;base64,[A-Za-z0-9+/=]+" '
                            r'download="[\w .()-]+\.pdf">', link) for link in links)
    assert page.count('class="tag media"') + len(images) + len(links) == 2


@pytest.mark.slow
def test_a_tool_image_is_drawn_in_chromium_under_the_page_policy(browser, tmp_path):
    path = media_recording(
        tmp_path / "media.jsonl",
        [{"type": "document", "media_type": "application/pdf", "data": PDF64, "title": "Q3 report"}],
        [{"type": "image", "media_type": "image/png", "data": PNG64}])
    page = tmp_path / "media.html"
    report.write(path, page)
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=800, height=600,
                 deviceScaleFactor=1, mobile=False)
    browser.load(page.as_uri())
    browser.evaluate("1")
    assert browser.evaluate("[...document.images].map(i => [i.complete, i.naturalWidth, "
                            "i.naturalHeight]).join()") == "true,24,16"
    assert browser.evaluate("document.querySelector('a[download]').textContent") == "Q3 report"
    errors = [m for m in browser.events if m.get("method") in ("Runtime.exceptionThrown",
              "Network.loadingFailed") or (
              m.get("method") == "Log.entryAdded" and m["params"]["entry"]["level"] == "error")]
    assert errors == []
    height = browser.call("Page.getLayoutMetrics")["cssContentSize"]["height"]
    shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": 800, "height": height, "scale": 1})
    (artifacts() / "report-media.png").write_bytes(base64.b64decode(shot["data"]))


def test_a_recorded_run_whose_tool_returned_a_screenshot_shows_it(tmp_path):
    from nacelle.messages import Message, Role, ToolCall
    from nacelle.testing import ScriptedBackend

    @nacelle.tool
    def screenshot(page: str) -> list:
        """Take a screenshot."""
        return [nacelle.Text(f"the {page} page"), nacelle.Image.from_bytes(png()),
                nacelle.Document.from_bytes(b"%PDF-1.4\n", title="page.pdf")]

    asks = Message(Role.ASSISTANT, (ToolCall("c1", "screenshot", '{"page": "home"}'),))
    path = tmp_path / "shot.jsonl"
    with Recorder(path) as recorder:
        nacelle.Agent(ScriptedBackend([asks, "A gradient."]), "Be brief.", tools=[screenshot],
                      observers=[recorder]).run([nacelle.user_text("Look.")])
    page = report.html(path)
    assert page.count(f'<img src="data:image/png;base64,{PNG64}"') == 1
    assert 'download="page.pdf">page.pdf</a>' in page and "the home page" in page


def record_delegating_run(path):
    """A parent whose researcher sub-agent (forwarding) calls slow, then answers."""
    replies = [
        Reply(chunks=anthropic_stream(["Asking."], tool_calls=[
            ("p1", "researcher", '{"task": "look"}')])),
        Reply(chunks=anthropic_stream(["Child looks."], tool_calls=[
            ("c1", "slow", json.dumps({"seconds": QUICK}))])),
        Reply(chunks=anthropic_stream(["Child found it."])),
        Reply(chunks=anthropic_stream(["Parent done."])),
    ]
    with FakeServer() as server:
        server.queue("/v1/messages", *replies)
        backend = anthropic.Backend(api_key="sk-test", base_url=server.url)
        researcher = nacelle.subagent_tool(nacelle.Agent(backend, "Research.", tools=[slow]),
                                           name="researcher", approve=lambda *a: True,
                                           forward=True)
        with Recorder(path) as recorder:
            agent = nacelle.Agent(backend, "Lead.", tools=[researcher], observers=[recorder])
            assert agent.run([nacelle.user_text("go")]).text == "Parent done."
    return path


def test_a_sub_agent_s_turns_and_tools_are_lanes_nested_under_the_call_that_started_it(
        tmp_path):
    path = record_delegating_run(tmp_path / "tree.jsonl")
    runs = list(dict.fromkeys(r["run_id"] for r in nacelle.observe.load(path)))
    assert len(runs) == 2
    page = report.html(path)
    assert "1 run<" in page and page.count('<section class="run"') == 1
    assert page.count('<section class="run sub-agent"') == 1
    rows = re.findall(r'<div class="row (\w+-lane)"( data-agent="([^"]*)")?><div class="label">'
                      r'([^<]*)</div>', page)
    shown = [(kind, agent, label.replace("&nbsp;", " ").replace("&middot;", "-"))
             for kind, _, agent, label in rows]
    assert [(kind, agent) for kind, agent, _ in shown] == [
        ("request-lane", ""), ("tool-lane", ""),
        ("request-lane", "researcher"), ("tool-lane", "researcher"),
        ("request-lane", "researcher"),
        ("request-lane", ""),
    ]
    assert shown[2][2].startswith("    researcher - turn 1")
    assert shown[3][2] == "      slow"
    timeline, _, rest = page.partition("<h2>Tokens and cost</h2>")
    parent_transcript = rest.split('<section class="run sub-agent"')[0]
    # The child's own text is in its section; the parent's holds only what it read.
    assert "Child looks." not in parent_transcript and "Parent done." in parent_transcript
    assert "Child looks." in page.split('<section class="run sub-agent"')[1]
    assert "Sub-agent researcher" in page and "started by call <code>p1</code>" in page
    only = report.html(path, run_id=runs[0])
    assert only.count('<section class="run') == 2


def test_the_providers_context_edits_are_a_line_under_the_token_table(tmp_path):
    applied = {"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 4,
                                  "cleared_input_tokens": 21000}]}
    events = anthropic_stream(["Done."], context_management=applied)
    path = tmp_path / "edits.jsonl"
    with FakeServer() as server, Recorder(path) as recorder:
        server.queue("/v1/messages", Reply(chunks=events))
        nacelle.Agent(anthropic.Backend("sk-test-0123456789", base_url=server.url), "s",
                      compaction=nacelle.compaction.context_edits(),
                      observers=[recorder]).run([nacelle.user_text("hi")])
    page = report.html(path)
    assert ('<p class="note compaction">Turn 1: context edits: cleared 4 tool uses: '
            "21,000 input tokens saved</p>") in page
