"""HTML to readable text, and charset detection: golden files and one rule per test."""

import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from nacelle.toolsets import html_text
from nacelle.toolsets.html_text import decode_html, decode_text, html_to_text

DATA = Path(__file__).resolve().parent.parent / "data" / "web"


def text(html, base="https://site.test/dir/page.html"):
    return html_to_text(html, base)[1]


def test_a_documentation_page_converts_to_the_golden_text():
    title, body = html_to_text((DATA / "article.html").read_text("utf-8"),
                               "https://docs.example.org/guide/vessels.html")
    assert title == "Pressure Vessels & You"
    assert body == (DATA / "article.md").read_text("utf-8")


def test_scripts_styles_and_hidden_elements_leave_no_text():
    body = text("<style>p{}</style><p>a</p><script>alert('x')</script><div hidden><div>b</div>"
                "c</div><noscript>d</noscript><template><p>e</p></template><p>f</p>")
    assert body == "a\n\nf\n"


def test_headings_become_hashes_by_level():
    assert text("<h1>One</h1><h3>Three</h3><p>x</p>") == "# One\n\n### Three\n\nx\n"


def test_relative_links_become_absolute_against_the_page():
    assert text('<a href="../up.html">up</a> <a href="/root">root</a> <a href="http://o.test/x">o</a>') == (
        "[up](https://site.test/up.html) [root](https://site.test/root) [o](http://o.test/x)\n")


def test_base_href_changes_what_links_resolve_against():
    assert text('<head><base href="https://cdn.test/a/"></head><a href="b">b</a>') == "[b](https://cdn.test/a/b)\n"


def test_links_to_fragments_and_javascript_keep_only_their_text():
    assert text('<a href="#x">here</a> and <a href="javascript:go()">there</a>') == "here and there\n"


def test_code_blocks_keep_their_whitespace_and_language():
    body = text('<pre class="language-sh">\n  a\n\n\n\n  b  \n</pre><p>after</p>')
    assert body == "```sh\n  a\n\n\n\n  b\n```\n\nafter\n"


def test_nested_lists_are_indented_and_ordered_lists_numbered_from_start():
    body = text('<ol start="7"><li>seven<ul><li>inner</li></ul></li><li>eight</li></ol>')
    assert body == "7. seven\n  - inner\n8. eight\n"


def test_unclosed_list_items_and_paragraphs_still_separate():
    assert text("<ul><li>a<li>b</ul><p>one<p>two") == "- a\n- b\n\none\n\ntwo\n"


def test_whitespace_collapses_and_entities_decode():
    assert text("<p>  a\n\t b &amp; &lt;c&gt; &#x263A; </p>") == "a b & <c> \u263a\n"


def test_an_empty_document_is_empty_text():
    assert html_to_text("<html><head><title>T</title></head><body> </body></html>") == ("T", "")


def test_data_uri_images_keep_their_alt_text_only():
    assert text('<img alt="logo" src="data:image/png;base64,AAAA">') == "![logo]\n"


@pytest.mark.parametrize("data, charset, expected", [
    (b"caf\xe9", "iso-8859-1", "café"),
    (b"\x93quoted\x94", "iso-8859-1", "\u201cquoted\u201d"),  # labels map to windows-1252
    (b"\xef\xbb\xbfcaf\xc3\xa9", "iso-8859-1", "café"),  # a BOM beats the header
    (b"caf\xc3\xa9", None, "café"),
    (b"caf\xe9", None, "café"),  # not UTF-8: windows-1252
    (b"caf\xc3\xa9", "no-such-charset", "café"),
    (b"\xff\xfec\x00a\x00", None, "ca"),
])
def test_text_decoding_follows_bom_header_then_utf8(data, charset, expected):
    assert decode_text(data, charset) == expected


def test_a_meta_charset_is_honoured_when_the_header_names_none():
    page = '<meta charset="windows-1251"><p>Привет</p>'.encode("cp1251")
    assert "Привет" in decode_html(page, None)


def test_an_http_equiv_charset_is_honoured():
    page = '<meta http-equiv="Content-Type" content="text/html; charset=koi8-r"><p>мир</p>'.encode("koi8-r")
    assert "мир" in decode_html(page, None)


def test_the_header_charset_beats_the_meta_charset():
    page = '<meta charset="windows-1251"><p>café</p>'.encode("utf-8")
    assert "café" in decode_html(page, "utf-8")


# -- hostile pages: linear time, bounded memory ------------------------------------------

PAGE_BYTES = 5 * 2**20


def peak_memory_of_converting(page):
    """The largest amount of memory the conversion held at once, in bytes."""
    tracemalloc.start()
    try:
        html_to_text(page, "https://site.test/dir/page.html")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def repeated(unit, size=PAGE_BYTES):
    return unit * (size // len(unit))


# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of a large
# pytest process would report its parent's peak as its own.
_RSS_GROWTH = """
import sys
from nacelle.toolsets.html_text import html_to_text

unit, size = sys.argv[1], int(sys.argv[2])
page = unit * (size // len(unit))

def status(field):
    with open("/proc/self/status") as lines:
        return next(int(l.split()[1]) * 1024 for l in lines if l.startswith(field + ":"))

before = status("VmRSS")
html_to_text(page, "https://site.test/dir/page.html")
print(status("VmHWM") - before)
"""


def peak_resident_growth_of_converting(unit, size):
    """How far the resident set of a fresh interpreter grew past what it held before
    converting (the process's peak, so never an underestimate). A subprocess rather
    than tracemalloc: tracing every allocation makes a 5 MB page take a minute."""
    done = subprocess.run([sys.executable, "-c", _RSS_GROWTH, unit, str(size)],
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_a_five_megabyte_page_of_nested_lists_converts_in_memory_linear_in_the_page():
    # Every list nested in the one before, never closed.
    peak = peak_resident_growth_of_converting("<ul><li>item ", PAGE_BYTES)
    assert peak < 10 * PAGE_BYTES, f"peak {peak / PAGE_BYTES:.1f}x the page"


@pytest.mark.slow
@pytest.mark.parametrize("unit", [
    "<ol><li>x<div>y",  # lists and blocks interleaved
    "<blockquote><ul><li>x",  # quotes and lists
    '<a href="' + "p" * 100 + '">x</a>',  # long links
], ids=["lists-and-blocks", "quotes-and-lists", "long-links"])
def test_nested_blocks_and_long_links_convert_in_memory_linear_in_the_page(unit):
    page = repeated(unit, 2**18)
    peak = peak_memory_of_converting(page)
    assert peak < 10 * len(page), f"peak {peak / len(page):.1f}x the page"


def test_indentation_stops_growing_at_the_nesting_cap():
    body = text("<ul><li>0" + "".join(f"<ul><li>{n}" for n in range(1, 12)))
    lines = body.splitlines()
    assert lines[:3] == ["- 0", "  - 1", "    - 2"]
    indents = [len(line) - len(line.lstrip(" ")) for line in lines]
    assert max(indents) == 2 * html_text.MAX_NESTING
    assert lines[-1] == " " * (2 * html_text.MAX_NESTING) + "- 11"


def test_quote_markers_stop_growing_at_the_nesting_cap():
    body = text("<blockquote>" * 20 + "deep")
    assert body == "> " * html_text.MAX_NESTING + "deep\n"


@pytest.mark.slow
@pytest.mark.parametrize("unit", [
    "<a ",  # start tags that never end
    "</a ",  # end tags that never end
    "<!-- ",  # comments that never end
    "<!-- > ",  # comments that never end, with a '>' after each
    "<?x ",  # processing instructions that never end
    "<![ ",  # marked sections that are not
    '<a href="/x">t',  # links opened inside links
    "<p>```x</p>",  # text that looks like a code fence
    "<svg><g></b>",  # nesting inside a dropped element, and stray end tags
    "<ol start=999999999><li>",  # numbered items
    "<table><tr><td>a<td>b",  # cells
    "<br>",  # line breaks
], ids=["start-tags", "end-tags", "comments", "comments-with-gt", "pis", "marked-sections",
        "nested-links", "fences", "dropped", "numbered", "cells", "breaks"])
def test_a_page_of_unclosed_constructs_converts_in_linear_time(unit):
    small, large = repeated(unit, 2**18), repeated(unit, 2**20)
    started = time.monotonic()
    html_to_text(small, "https://site.test/")
    small_seconds = time.monotonic() - started
    started = time.monotonic()
    html_to_text(large, "https://site.test/")
    large_seconds = time.monotonic() - started
    # Four times the page may take four times as long; a square law would take sixteen.
    assert large_seconds < 30
    assert large_seconds < max(0.5, 10 * small_seconds), (small_seconds, large_seconds)


def test_a_marked_section_that_is_not_one_is_text_not_a_crash():
    assert text("<p>a<![ x</p><p>b</p>") == "a<![ x\n\nb\n"


def test_an_unclosed_start_tag_at_the_end_of_the_page_is_text():
    assert text("<p>x</p><a <a b") == "x\n\n<a <a b\n"


def test_a_link_opened_inside_a_link_closes_the_first():
    assert text('<a href="/1">one <a href="/2">two</a> three</a>') == (
        "[one](https://site.test/1) [two](https://site.test/2) three\n")


def test_an_ordered_list_start_that_is_not_a_small_number_counts_from_one():
    assert text('<ol start="²"><li>a</li></ol>') == "1. a\n"
    assert text(f'<ol start="{"9" * 5000}"><li>a</li></ol>') == "1. a\n"
    assert text('<ol start="12"><li>a</li></ol>') == "12. a\n"


def test_a_url_longer_than_the_cap_leaves_only_the_link_text():
    long = "/" + "p" * html_text.MAX_URL_CHARS
    assert text(f'<a href="{long}">far</a> <img alt="pic" src="{long}">') == "far ![pic]\n"


def test_a_base_href_longer_than_the_cap_is_ignored():
    long = "https://cdn.test/" + "p" * html_text.MAX_URL_CHARS + "/"
    assert text(f'<base href="{long}"><a href="b">b</a>') == "[b](https://site.test/dir/b)\n"


def test_blank_lines_inside_a_fenced_block_in_a_list_are_kept():
    body = text("<ul><li>code:<pre>a\n\n\n\nb</pre></li></ul>")
    assert body == "- code:\n\n  ```\n  a\n\n\n\n  b\n  ```\n"
