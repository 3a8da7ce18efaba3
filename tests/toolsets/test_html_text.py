"""HTML to readable text, and charset detection: golden files and one rule per test."""

from pathlib import Path

import pytest

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
