"""The chat page (nacelle/serve/page.html) in a real headless Chromium, driven over its
DevTools protocol (the launcher and client in tests/browser.py): a
prompt typed in, its text streaming in while the tool still runs, a paused call
approved by a click, its result and the answer shown, nothing fetched but the page's
own loopback origin, hostile text shown as text; Markdown drawn as elements (a script
in it shown as text), the waiting dots, the stop button, an approval card with the
diff the call would make, reasoning folded, a cut answer marked, a sub-agent's work
indented inside its call, a call's arguments as they stream, and the conversation
drawn again after a reload. Screenshots go to NACELLE_ARTIFACTS
(or a folder under the system's temporary directory), never into the checkout: the
README's docs/serve.png is a committed file, and a test run leaves it as it was."""

import base64
import json
import os
import threading
import time
from pathlib import Path

import pytest

import serve_app
from nacelle.serve import make_server, wsgi_app
from nacelle.sessions import FileStore
from nacelle.toolsets import LocalTools
from browser import artifacts, chromium, launched, png

pytestmark = pytest.mark.slow  # a headless Chromium

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module", autouse=True)
def docs_untouched():
    """Every tracked picture under docs/ as it was before this module ran: same bytes,
    never even rewritten (a rewrite with equal bytes still dirties a checkout's
    timestamps and races a concurrent run)."""
    def state():
        return {path.name: (path.stat().st_mtime_ns, path.read_bytes())
                for path in sorted(DOCS.glob("*.png"))} if DOCS.is_dir() else {}

    before = state()
    yield
    changed = sorted(name for name, seen in state().items() if before.get(name) != seen)
    assert changed == [], f"the browser tests wrote into docs/: {changed}"


@pytest.fixture
def served(tmp_path, monkeypatch):
    monkeypatch.setenv("NACELLE_SERVE_NOTES", str(tmp_path / "notes"))
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("first\nsecond\nthird\n")
    monkeypatch.setenv("NACELLE_SERVE_ROOT", str(root))
    local = LocalTools(root)
    app = wsgi_app(serve_app.make_agent, store=FileStore(tmp_path / "store"), keepalive=0.2,
                   preview=local.preview)
    httpd = make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.url
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)
        local.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """test_report's browser, but with loopback reachable: every other address goes to
    a proxy that is bound and never listens, so any request off this machine fails."""
    binary = chromium()
    if binary is None:
        pytest.skip("no Chromium binary on PATH (chromium, chromium-browser, google-chrome): "
                    "install Debian's chromium package to run the browser checks")
    with launched(binary, tmp_path_factory.mktemp("chromium-profile"), "127.0.0.1") as page:
        yield page



def until(browser, expression, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = browser.evaluate(expression)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not true within {timeout} s: {expression}")


def type_and_send(browser, text):
    browser.evaluate("document.getElementById('prompt').focus(), true")
    browser.call("Input.insertText", text=text)
    for kind in ("keyDown", "keyUp"):
        browser.call("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter",
                     windowsVirtualKeyCode=13, text="\r" if kind == "keyDown" else "")


def click(browser, selector):
    box = browser.evaluate(f"(() => {{ const r = document.querySelector({selector!r})"
                           ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    for kind in ("mousePressed", "mouseReleased"):
        browser.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left",
                     clickCount=1)


def screenshot(browser, name):
    shot = browser.call("Page.captureScreenshot", format="png")
    data = base64.b64decode(shot["data"])
    (artifacts() / name).write_bytes(data)
    return data


def test_the_chat_page_streams_text_and_asks_for_approval(browser, served):
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=1000, height=760,
                 deviceScaleFactor=1, mobile=False)
    browser.load(served)

    type_and_send(browser, "hello")
    until(browser, "document.querySelector('#status').textContent.includes('end')")
    assert browser.evaluate("document.querySelector('.msg.assistant').textContent") == \
        "Hello, world <b>!</b>"
    assert browser.evaluate("document.querySelectorAll('#log b').length") == 0
    assert "$0.0004" in browser.evaluate("document.querySelector('.turn').textContent")

    type_and_send(browser, "slow 1.5")
    # The first delta shows while the tool still sleeps: the page reads the stream as it comes.
    until(browser, "[...document.querySelectorAll('.msg.assistant')].some("
                   "m => m.textContent === 'Working on it.')")
    assert browser.evaluate("document.querySelector('#status').textContent") == "running"
    assert browser.evaluate("document.querySelector('.tool .state').textContent") == "running"
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    assert "slept 1.5" in browser.evaluate("document.querySelector('.tool .result').textContent")

    type_and_send(browser, "pause Ada Lovelace")
    until(browser, "document.querySelector('#status').textContent === 'waiting for your decision'")
    assert browser.evaluate("!!document.querySelector('button.approve')")
    screenshot(browser, "serve-approval.png")
    click(browser, "button.approve")
    until(browser, "[...document.querySelectorAll('.tool.ok .result')].some("
                   "r => r.textContent === 'sent to Ada Lovelace')")
    until(browser, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent === 'Sent.')")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    assert (Path(os.environ["NACELLE_SERVE_NOTES"]).read_text() == "send Ada Lovelace\n")

    browser.evaluate("1")
    errors = [m for m in browser.events if m.get("method") in ("Runtime.exceptionThrown",
              "Network.loadingFailed") or (m.get("method") == "Runtime.consoleAPICalled"
              and m["params"]["type"] in ("error", "assert")) or (
              m.get("method") == "Log.entryAdded" and m["params"]["entry"]["level"] == "error")]
    assert errors == []
    requests = {m["params"]["request"]["url"] for m in browser.events
                if m.get("method") == "Network.requestWillBeSent"}
    assert requests and all(url.startswith(served) for url in requests), requests

    data = screenshot(browser, "serve.png")
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 200_000


def test_an_approval_clicked_before_the_run_is_named_is_sent_once_it_is(browser, served):
    """The button shows when the call's paused result arrives; the run to resume is named
    by the "done" event after it. A click in between is kept and sent, not dropped."""
    browser.load(served)
    # Click inside the same task that drew the button, so "done" cannot have arrived yet.
    browser.evaluate("""(() => { const draw = View.prototype.result;
        View.prototype.result = function (data) {
          draw.call(this, data);
          if (data.paused) { window.clickedEarly = !this.run;
                             document.querySelector('button.approve').click(); } };
        return true; })()""")
    type_and_send(browser, "pause Grace Hopper")
    until(browser, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent === 'Sent.')")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    assert browser.evaluate("window.clickedEarly") is True
    assert Path(os.environ["NACELLE_SERVE_NOTES"]).read_text() == "send Grace Hopper\n"


def test_call_ids_named_like_object_properties_are_kept_as_plain_keys(browser, served):
    browser.call("Runtime.enable")
    browser.load(served)
    type_and_send(browser, "protos")
    until(browser, "document.querySelectorAll('button.approve').length === 2")
    for _ in range(2):
        click(browser, "button.approve")
    until(browser, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent === 'Sent.')")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    results = browser.evaluate("[...document.querySelectorAll('.tool.ok .result')]"
                               ".map(r => r.textContent).sort().join('|')")
    assert results == "sent to __proto__|sent to constructor"
    assert sorted(Path(os.environ["NACELLE_SERVE_NOTES"]).read_text().splitlines()) == [
        "send __proto__", "send constructor"]
    assert [m for m in browser.events if m.get("method") == "Runtime.exceptionThrown"] == []


def test_only_base64_pictures_of_the_four_raster_types_become_images(browser, served):
    """The page's own handling of a result's content, fed straight to its View: an SVG,
    a media type or data that would end the URL, and markup in a title are named as
    text; only the PNG is an <img>."""
    browser.call("Runtime.enable")
    browser.load(served)
    good = base64.b64encode(png()).decode()
    parts = [{"type": "text", "text": "shots"},
             {"type": "image", "media_type": "image/png", "data": good},
             {"type": "image", "media_type": "image/svg+xml", "data": "PHN2Zz4="},
             {"type": "image", "media_type": 'image/png" onerror="x', "data": good},
             {"type": "image", "media_type": "image/png", "data": '"><img src=x onerror=alert(1)>'},
             {"type": "document", "media_type": "application/pdf", "data": "JVBERi0=",
              "title": "<img src=x onerror=alert(1)>"},
             {"type": "document", "data": "JVBERi0="}, "junk", None]
    result = {"id": "s1", "index": 0, "name": "shot", "server": "", "result": "shots",
              "error": None, "refused": False, "paused": False, "discarded": False,
              "duration": 0.1, "content": parts}
    browser.evaluate(f"(() => {{ const v = new View(); v.call({{id: 's1', name: 'shot', "
                     f"input: '{{}}'}}); v.result({json.dumps(result)}); return true; }})()")
    images = browser.evaluate("[...document.images].map(i => i.src.slice(0, 30)).join('|')")
    assert images == f"data:image/png;base64,{good[:8]}"
    assert browser.evaluate("[...document.querySelectorAll('.tool .note, .tool .document')]"
                            ".map(n => n.textContent).join('|')") == (
        "[image image/svg+xml, 5 bytes]|[image image/png\" onerror=\"x, "
        f"{len(png()):,} bytes]|[image image/png, unreadable data]|"
        "document <img src=x onerror=alert(1)> (application/pdf, 5 bytes)")
    assert [m for m in browser.events if m.get("method") == "Runtime.exceptionThrown"] == []


def test_a_tools_image_is_drawn_and_its_document_named_with_its_size(browser, served):
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=800, height=600,
                 deviceScaleFactor=1, mobile=False)
    browser.load(served)
    browser.events.clear()
    type_and_send(browser, "shot home")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    until(browser, "[...document.images].every(i => i.complete) && document.images.length")
    assert browser.evaluate("[...document.querySelectorAll('.tool img.media')].map(i => "
                            "[i.naturalWidth, i.naturalHeight, i.alt].join()).join('|')") == \
        f"24,16,image image/png, {len(png()):,} bytes"
    assert browser.evaluate("document.querySelector('.tool .result').textContent") == \
        "screenshot of home"
    assert browser.evaluate("document.querySelector('.tool .document').textContent") == \
        "document <b>Q3</b> report (application/pdf, 15 bytes)"
    assert browser.evaluate("document.querySelectorAll('#log b').length") == 0
    errors = [m for m in browser.events if m.get("method") in ("Runtime.exceptionThrown",
              "Network.loadingFailed") or (
              m.get("method") == "Log.entryAdded" and m["params"]["entry"]["level"] == "error")]
    assert errors == []
    screenshot(browser, "serve-media.png")


def test_a_sub_agent_s_work_is_indented_under_its_call_and_its_approval_asked_like_any(
        browser, served):
    browser.call("Runtime.enable")
    browser.load(served)
    type_and_send(browser, "delegate Ada")
    until(browser, "document.querySelector('#status').textContent === 'waiting for your decision'")
    # Only the sub-agent's own call is asked about; the call that started it waits.
    assert browser.evaluate("document.querySelectorAll('button.approve').length") == 1
    # The sub-agent's work is drawn inside the box of the call that started it.
    assert browser.evaluate("!!document.querySelector('.tool[data-id=d1] > .sub .tool button.approve')")
    assert browser.evaluate("document.querySelector('.tool > .sub > .agent').textContent") == "errand"
    assert browser.evaluate("getComputedStyle(document.querySelector('.tool > .sub')).marginLeft") \
        == "24px"
    assert browser.evaluate("[...document.querySelectorAll('.sub .msg.assistant')]"
                            ".map(m => m.textContent).join('|')") == "On it."
    screenshot(browser, "serve-subagent.png")
    click(browser, "button.approve")
    until(browser, "[...document.querySelectorAll('.msg.assistant')].some("
                   "m => m.textContent === 'Delegated and sent.')")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    assert browser.evaluate("document.querySelector('.sub .tool.ok .result').textContent") == \
        "sent to Ada"
    assert Path(os.environ["NACELLE_SERVE_NOTES"]).read_text() == "send Ada\n"
    assert [m for m in browser.events if m.get("method") == "Runtime.exceptionThrown"] == []


def page_errors(browser):
    return [m for m in browser.events if m.get("method") in ("Runtime.exceptionThrown",
            "Network.loadingFailed") or (m.get("method") == "Log.entryAdded"
            and m["params"]["entry"]["level"] == "error")]


def fresh(browser, url, width=900, height=700):
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                 deviceScaleFactor=1, mobile=False)
    browser.load(url)
    browser.events.clear()


def test_markdown_is_drawn_as_elements_and_markup_in_it_stays_text(browser, served):
    fresh(browser, served, height=900)
    type_and_send(browser, "markdown")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    shape = browser.evaluate("""(() => { const b = document.querySelector('.msg.assistant');
        const q = s => [...b.querySelectorAll(s)].map(n => n.textContent);
        return {h1: q('h1'), h2: q('h2'), strong: q('strong'), em: q('em'), code: q('p code'),
          ol: q('ol > li').length, ul: q('ol ul > li'), pre: q('pre code'),
          lang: b.querySelector('pre code').dataset.lang, th: q('th'), td: q('td'),
          right: b.querySelector('td:nth-child(2)').style.textAlign,
          del: q('blockquote del'), links: [...b.querySelectorAll('a')].map(a =>
            [a.textContent, a.href, a.rel, a.target, a.title]),
          scripts: document.querySelectorAll('script').length,
          text: b.textContent}; })()""")
    assert shape["h1"] == ["Release notes"] and shape["h2"] == ["Steps"]
    assert shape["strong"] == ["bold"] and shape["em"] == ["emphasis"]
    assert shape["code"] == ["inline code"] and shape["ol"] == 2
    assert shape["ul"] == ["with --yes", "or without"]
    assert shape["pre"] == ['print("<b>hi</b>")'] and shape["lang"] == "python"
    assert shape["th"] == ["Name", "Size"] and shape["td"] == ["a.txt", "12", "b.txt", "3"]
    assert shape["right"] == "right" and shape["del"] == ["old"]
    assert shape["links"] == [["link", "https://example.com/docs", "noopener noreferrer",
                               "_blank", "docs"]]
    assert "bad link stays text" in shape["text"]
    assert "<script>alert(1)</script>" in shape["text"] and shape["scripts"] == 1
    assert browser.evaluate("document.querySelectorAll('#log b, #log script').length") == 0
    assert page_errors(browser) == []
    screenshot(browser, "serve-markdown.png")


def test_markdown_keeps_only_web_and_mail_links_and_data_pictures(browser, served):
    browser.load(served)
    good = base64.b64encode(png()).decode()
    text = ("[a](javascript:alert(1)) [b](data:text/html,x) [c](/runs) [d](mailto:x@y.example) "
            "<https://example.org/x> see https://example.net/y. [e](vbscript:x) "
            f"![pic](data:image/png;base64,{good}) ![svg](data:image/svg+xml;base64,PHN2Zz4=) "
            "![web](https://example.com/i.png) " + "*" * 3000 + " `" * 2000)
    hrefs = browser.evaluate(f"""(() => {{ const f = markdown({json.dumps(text)});
        const box = document.createElement('div'); box.appendChild(f);
        return [[...box.querySelectorAll('a')].map(a => a.href),
                [...box.querySelectorAll('img')].map(i => i.src.slice(0, 22)),
                box.textContent.includes('[image: svg]')]; }})()""")
    assert hrefs == [["mailto:x@y.example", "https://example.org/x", "https://example.net/y",
                      "https://example.com/i.png"], ["data:image/png;base64,"], True]


def test_hostile_markdown_is_read_in_bounded_time(browser, served):
    """Text a model may write to make a reader loop: unclosed openers by the thousand,
    nesting past the cap, brackets that never close, a table wider than the cap."""
    browser.load(served)
    cases = {"stars": "*a " * 20000, "underscores": "_a " * 20000, "ticks": "`" * 20000,
             "mixed ticks": "".join("`" * n + "x" for n in range(1, 200)),
             "brackets": "[" * 20000, "images": "![" * 10000, "links": "[a](" * 10000,
             "angles": "<http" * 10000, "quotes": ">" * 20000 + " deep",
             "lists": "- " * 20000 + "deep", "emphasis": "**a " * 10000 + "b**" * 10000,
             "wide table": "|" * 5000 + "\n" + "|-" * 5000 + "\n" + "|\n" * 5000}
    for name, text in cases.items():
        took = browser.evaluate(f"""(() => {{ const t = performance.now();
            const box = document.createElement('div'); box.appendChild(markdown({json.dumps(text)}));
            return [performance.now() - t, box.querySelectorAll('*').length]; }})()""")
        assert took[0] < 1500 and took[1] < 50_000, (name, took)


def test_the_waiting_dots_show_until_the_answer_and_stop_cancels_the_run(browser, served):
    fresh(browser, served)
    assert browser.evaluate("document.querySelector('#stop').hidden") is True
    type_and_send(browser, "wait 1")
    until(browser, "document.querySelector('#waiting').classList.contains('on')")
    assert browser.evaluate("getComputedStyle(document.querySelector('#waiting')).display") == "block"
    assert browser.evaluate("!document.querySelector('#stop').hidden && "
                            "document.querySelector('#send').hidden")
    screenshot(browser, "serve-waiting.png")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    assert browser.evaluate("document.querySelector('#waiting').classList.contains('on')") is False
    assert browser.evaluate("document.querySelector('#stop').hidden") is True

    type_and_send(browser, "hang")
    until(browser, "document.querySelector('.tool .state') && "
                   "document.querySelector('.tool .state').textContent === 'running'")
    notes = Path(os.environ["NACELLE_SERVE_NOTES"])
    deadline = time.monotonic() + 10
    while "hang started" not in (notes.read_text() if notes.exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    click(browser, "#stop")
    until(browser, "document.querySelector('#status').textContent === 'stopped'")
    assert browser.evaluate("document.querySelector('.note.stopped').textContent") == "Stopped."
    assert browser.evaluate("document.querySelectorAll('.msg.error').length") == 0
    assert "hang cancelled" in notes.read_text()
    cancels = [m["params"]["request"]["url"] for m in browser.events
               if m.get("method") == "Network.requestWillBeSent"
               and m["params"]["request"]["url"].endswith("/cancel")]
    assert len(cancels) == 1 and cancels[0].startswith(served + "runs/run_")
    assert browser.evaluate("document.querySelector('#send').hidden") is False

    # Stopped while the model is still silent: the answer has not named the run yet, so
    # the page drops the connection, which the server reads as a cancel.
    type_and_send(browser, "wait 30")
    until(browser, "document.querySelector('#waiting').classList.contains('on')")
    for kind in ("keyDown", "keyUp"):  # Esc is the stop button's key
        browser.call("Input.dispatchKeyEvent", type=kind, key="Escape", code="Escape",
                     windowsVirtualKeyCode=27)
    until(browser, "document.querySelector('#status').textContent === 'stopped'", timeout=5)
    assert browser.evaluate("document.querySelectorAll('.note.stopped').length") == 2
    assert browser.evaluate("document.querySelectorAll('.msg.error').length") == 0


def test_an_approval_card_shows_the_diff_the_call_would_make(browser, served):
    fresh(browser, served)
    type_and_send(browser, "write")
    until(browser, "document.querySelector('#status').textContent === 'waiting for your decision'")
    lines = browser.evaluate("[...document.querySelectorAll('.tool pre.preview span')]"
                             ".map(s => s.className + ' ' + s.textContent.trimEnd())")
    assert lines == ["file --- a/notes.txt", "file +++ b/notes.txt", "hunk @@ -1,3 +1,3 @@",
                     "  first", "del -second", "add +second, changed", "  third"]
    assert browser.evaluate("document.querySelector('.tool details.args').open") is False
    screenshot(browser, "serve-approval-diff.png")
    click(browser, "button.approve")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    root = Path(os.environ["NACELLE_SERVE_ROOT"])
    assert (root / "notes.txt").read_text() == "first\nsecond, changed\nthird\n"


def test_reasoning_is_folded_and_a_cut_answer_is_marked(browser, served):
    fresh(browser, served)
    type_and_send(browser, "think")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    assert browser.evaluate("document.querySelector('details.thinking').open") is False
    assert browser.evaluate("document.querySelector('details.thinking div').textContent") == \
        "Weighing the question first."
    assert browser.evaluate("document.querySelector('details.thinking div').checkVisibility()") is False
    assert browser.evaluate("document.querySelector('details.thinking summary').textContent"
                            ".startsWith('Thought for')")
    assert browser.evaluate("document.querySelectorAll('.cutoff').length") == 0
    type_and_send(browser, "cut")
    until(browser, "document.querySelector('#status').textContent.startsWith('max_tokens')")
    assert browser.evaluate("document.querySelectorAll('.cutoff').length") == 1
    assert "output limit" in browser.evaluate("document.querySelector('.cutoff').textContent")
    assert browser.evaluate("[...document.querySelectorAll('.msg.assistant')].pop()"
                            ".classList.contains('cut')")
    screenshot(browser, "serve-cut.png")


def test_a_sub_agents_work_is_indented_in_its_call_and_arguments_show_as_they_stream(
        browser, served):
    """Fed to the page's View as the server's events would come: a call whose input
    streams, then a sub-agent's text, call and result carrying ``agent`` and ``via``."""
    fresh(browser, served)
    events = [("tool_input", {"id": "c1", "index": 0, "name": "research", "text": '{"topic": "o'}),
              ("tool_input", {"id": "c1", "index": 0, "name": "research", "text": 'wls"}'})]
    browser.evaluate(f"""(() => {{ window.v = new View();
        {json.dumps(events)}.forEach(([k, d]) => v.handle(k, d)); return true; }})()""")
    assert browser.evaluate("document.querySelector('.tool .input').textContent") == '{"topic": "owls"}'
    assert browser.evaluate("document.querySelector('.tool .state').textContent") == "writing…"
    sub = {"agent": ["researcher"], "via": "c1"}
    events = [("tool_call", {"id": "c1", "index": 0, "name": "research", "server": "",
                             "input": '{"topic": "owls"}'}),
              ("text", {"text": "Looking into **owls**.", **sub}),
              ("tool_call", {"id": "c1", "index": 0, "name": "search", "server": "",
                             "input": '{"q": "owls"}', **sub}),
              ("tool_result", {"id": "c1", "index": 0, "name": "search", "server": "",
                               "result": "3 hits", "error": None, "refused": False,
                               "paused": False, "discarded": False, "duration": 0.1, **sub}),
              ("tool_result", {"id": "c1", "index": 0, "name": "research", "server": "",
                               "result": "Owls are birds.", "error": None, "refused": False,
                               "paused": False, "discarded": False, "duration": 0.3}),
              ("text", {"text": "Owls are birds."})]
    browser.evaluate(f"""(() => {{ {json.dumps(events)}.forEach(([k, d]) => v.handle(k, d));
        drawAll(); return true; }})()""")
    shape = browser.evaluate("""(() => { const outer = document.querySelector('.tool');
        const sub = outer.querySelector('.sub');
        return [outer.querySelector(':scope > .head').firstChild.textContent,
          sub.querySelector('.agent').textContent, sub.querySelector('.msg.assistant strong').textContent,
          sub.querySelector('.tool .head').firstChild.textContent, sub.querySelector('.tool .result').textContent,
          outer.querySelector(':scope > .result').textContent,
          sub.getBoundingClientRect().left - outer.getBoundingClientRect().left > 10,
          document.querySelectorAll('#log > .msg.assistant').length]; })()""")
    assert shape == ["research", "researcher", "owls", "search", "3 hits", "Owls are birds.", True, 1]
    assert page_errors(browser) == []
    screenshot(browser, "serve-subagent-events.png")


def test_the_conversation_is_drawn_again_after_a_reload(browser, served):
    fresh(browser, served)
    type_and_send(browser, "shot home")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    type_and_send(browser, "markdown")
    until(browser, "document.querySelectorAll('.turn').length === 3")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    before = browser.evaluate("localStorage.getItem('nacelle.session')")
    assert before.startswith("page-")
    browser.load(served)
    until(browser, "document.querySelector('#status').textContent.includes('restored')")
    shape = browser.evaluate("""[[...document.querySelectorAll('.msg.user')].map(m => m.textContent),
        document.querySelector('.tool .result').textContent, document.querySelector('.tool .state').textContent,
        document.querySelectorAll('.tool img.media').length,
        [...document.querySelectorAll('.msg.assistant')].map(m => m.textContent.slice(0, 13)),
        document.querySelectorAll('.msg.assistant h1, .msg.assistant table').length]""")
    assert shape == [["shot home", "markdown"], "screenshot of home", "done", 1,
                     ["Looking.", "It is a gradi", "Release notes"], 2]
    screenshot(browser, "serve-restored.png")
    # The next prompt continues the same session; a new chat starts an empty one.
    type_and_send(browser, "hello")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    assert browser.evaluate("localStorage.getItem('nacelle.session')") == before
    click(browser, "#new")
    assert browser.evaluate("document.querySelectorAll('#log > .msg').length") == 0
    assert browser.evaluate("localStorage.getItem('nacelle.session')") != before
    browser.load(served)
    time.sleep(0.3)
    assert browser.evaluate("document.querySelectorAll('#log > .msg').length") == 0


def test_a_run_waiting_for_a_decision_asks_again_after_a_reload(browser, served):
    fresh(browser, served)
    type_and_send(browser, "hello")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    type_and_send(browser, "pause Ada")
    until(browser, "document.querySelector('#status').textContent === 'waiting for your decision'")
    browser.load(served)
    until(browser, "document.querySelector('#status').textContent === 'waiting for your decision'")
    assert browser.evaluate("[...document.querySelectorAll('.msg.user')].map(m => m.textContent)") == [
        "hello", "pause Ada"]
    assert browser.evaluate("document.querySelectorAll('button.approve').length") == 1
    assert browser.evaluate("document.querySelector('.tool .state').textContent") == "waiting for approval"
    click(browser, "button.approve")
    until(browser, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent === 'Sent.')")
    until(browser, "document.querySelector('#status').textContent.startsWith('end')")
    assert Path(os.environ["NACELLE_SERVE_NOTES"]).read_text() == "send Ada\n"
    assert browser.evaluate("localStorage.getItem('nacelle.paused')") is None
    browser.load(served)  # decided: the session now holds the whole conversation
    until(browser, "document.querySelector('#status').textContent.includes('restored')")
    assert browser.evaluate("document.querySelectorAll('button.approve').length") == 0
    assert browser.evaluate("[...document.querySelectorAll('.msg.assistant')].pop().textContent") == "Sent."


def test_the_sources_an_answer_cites_are_listed_after_it_and_only_web_pages_linked(
        browser, served):
    """Fed to the page's View as the server's events would come: the answer's text, then
    "done" with the conversation, whose last message's text parts carry citations."""
    fresh(browser, served)
    cited = [{"url": "https://example.org/tides", "title": "Tides <b>of</b> Brest",
              "cited_text": "06:12", "state": ""},
             {"url": "https://example.org/tides", "title": "Tides <b>of</b> Brest",
              "cited_text": "again", "state": ""},
             {"url": "javascript:alert(1)", "title": "bad", "cited_text": "", "state": ""},
             {"url": "", "title": "A fetched PDF", "cited_text": "", "state": ""}]
    messages = [{"role": "user", "parts": [{"type": "text", "text": "When is high tide?"}]},
                {"role": "assistant", "parts": [
                    {"type": "text", "text": "High tide is at 06:12.", "citations": cited}]}]
    done = {"stop": "end", "usage": {"total": 40, "cost": 0, "priced": False},
            "messages": messages}
    browser.evaluate(f"""(() => {{ window.v = new View();
        v.handle("text", {{text: "High tide is at 06:12."}});
        v.handle("done", {json.dumps(done)}); return true; }})()""")
    shown = browser.evaluate("""(() => { const box = document.querySelector('.sources');
        return [box.firstChild.textContent,
          [...box.querySelectorAll('li')].map(li => li.textContent),
          [...box.querySelectorAll('a')].map(a => a.getAttribute('href')),
          box.querySelectorAll('b').length,
          box.previousElementSibling.classList.contains('assistant')]; })()""")
    assert shown == ["Sources", ["Tides <b>of</b> Brest", "bad", "A fetched PDF"],
                     ["https://example.org/tides"], 0, True]
    assert page_errors(browser) == []
