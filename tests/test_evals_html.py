"""The eval report's page: everything escaped, self-contained, in Chromium with rate
bars to scale, regressions marked against a baseline."""

import base64
import json

import pytest

from browser import artifacts, chromium, launched
from nacelle.evals import CaseReport, EvalReport

HOSTILE = '<script>alert(1)</script>"\'&'

NEW = EvalReport((
    CaseReport("steady", 10, 10, 0.01, 0.0, 1200, 3.5),
    CaseReport(HOSTILE, 10, 2, 0.02, 0.001, 900, 2.0, failures=tuple(
        {"attempt": i, "reasons": [f'contains(\'x\'): <img src=x onerror="alert({i})">'],
         "text": "</pre><b>answer</b>"} for i in range(8))),
    CaseReport("better", 10, 10),
), repeat=10)
OLD = EvalReport((CaseReport("steady", 10, 10), CaseReport(HOSTILE, 10, 10),
                  CaseReport("better", 10, 1)), repeat=10)


def test_the_page_escapes_every_name_reason_and_answer():
    page = NEW.html(OLD)
    assert "<script>" not in page and "<img" not in page and "<b>answer" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&amp;" in page
    assert 'Content-Security-Policy' in page and "http://" not in page and "https://" not in page
    assert page.count('class="failure"') == 8
    assert "Against the baseline: 1 regressed" in page


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary = chromium()
    if binary is None:
        pytest.skip("no Chromium binary on PATH (chromium, chromium-browser, google-chrome): "
                    "install Debian's chromium package to run the browser checks")
    with launched(binary, tmp_path_factory.mktemp("chromium-profile"), "<-loopback>") as page:
        yield page


ROWS = """JSON.stringify([...document.querySelectorAll('tbody tr')].map(r => ({
  name: r.querySelector('td').firstChild.textContent, change: r.className,
  fill: r.querySelector('.fill').getBoundingClientRect().width,
  bar: r.querySelector('.rate').getBoundingClientRect().width,
  ci: [r.querySelector('.ci').getBoundingClientRect().left - r.querySelector('.rate').getBoundingClientRect().left,
       r.querySelector('.ci').getBoundingClientRect().width]})))"""


@pytest.mark.slow
@pytest.mark.parametrize("width,mobile", [(1280, False), (390, True)])
def test_the_page_renders_in_chromium_offline_with_rates_to_scale(browser, tmp_path, width,
                                                                   mobile):
    page = tmp_path / "eval.html"
    page.write_text(NEW.html(OLD), encoding="utf-8")
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=width, height=900,
                 deviceScaleFactor=1, mobile=mobile)
    browser.load(page.as_uri())
    browser.evaluate("1")
    errors = [m for m in browser.events if m.get("method") in ("Runtime.exceptionThrown",
              "Network.loadingFailed", "Runtime.consoleAPICalled") or (
              m.get("method") == "Log.entryAdded" and m["params"]["entry"]["level"] == "error")]
    assert errors == []
    requests = [m["params"]["request"]["url"] for m in browser.events
                if m.get("method") == "Network.requestWillBeSent"]
    assert requests == [page.as_uri()]
    rows = json.loads(browser.evaluate(ROWS))
    assert [(r["name"], r["change"]) for r in rows] == [
        ("steady", ""), (HOSTILE + " ", "regressed"), ("better ", "improved")]
    steady, hostile, _ = rows
    assert steady["fill"] == pytest.approx(steady["bar"] - 2, abs=1.5)  # 100%, inside the border
    assert hostile["fill"] == pytest.approx(0.2 * (hostile["bar"] - 2), abs=1.5)
    low, high = NEW.cases[1].interval
    assert hostile["ci"][1] == pytest.approx((high - low) * (hostile["bar"] - 2), abs=1.5)
    assert browser.evaluate("document.querySelectorAll('script,img').length") == 0
    assert browser.evaluate("document.querySelectorAll('details.failure').length") == 8
    shot = browser.call("Page.captureScreenshot", format="png")
    (artifacts() / f"eval-{width}.png").write_bytes(base64.b64decode(shot["data"]))
