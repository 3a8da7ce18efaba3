"""HTML to readable text for ``web_fetch``: what a model should read of a page.

:func:`html_to_text` turns a document into Markdown-flavoured text — ``#`` headings,
``-`` and ``1.`` list items (nested lists indented), fenced code blocks kept verbatim
(with the ``language-*`` class as the fence's info string), ``[text](url)`` links made
absolute against the page (or its ``<base href>``), ``> `` quotes, ``|``-separated
table cells — and returns the ``<title>`` beside it. Scripts, styles, templates,
SVG, frames, form controls and elements marked ``hidden`` are dropped: they are code
and chrome, not what the page says. Markdown is the target because models read it
well and it keeps structure (a heading stays a heading) at little cost in characters.

:func:`decode_html` picks the charset the way browsers do, in this order: a byte order
mark, the ``Content-Type`` charset, a ``<meta charset>`` (or ``http-equiv``) in the
first 2 KB, then UTF-8 if the bytes are valid UTF-8, else windows-1252. Like the WHATWG
encoding standard, ``iso-8859-1`` and ``us-ascii`` labels decode as windows-1252.

Built on ``html.parser`` (no third-party parser), which tolerates the broken markup of
real pages without building a tree. A hostile page costs time and memory in proportion
to its size, never its square. Nesting shows to :data:`MAX_NESTING` levels (indentation
and quote markers together), so no line's prefix grows with the page. A link opened
inside a link closes the first, as browsers do, and a dropped element is tracked by its
tag and a count, so no per-tag work grows with the nesting. A URL longer than
:data:`MAX_URL_CHARS` is left out (the link keeps its text), so one long ``<base href>``
is not copied into every link. Openings that can never close — a ``<`` with no ``>``
after it, a ``<!--`` with no comment end after it — become text before parsing, since
``html.parser`` before Python 3.13.4 rescans the rest of the page from each; ``<![`` is
always text (browsers read it as a bogus comment outside SVG and MathML, which are
dropped, and ``html.parser`` raises on a malformed one). Lines are finished as they are
written (:mod:`nacelle.toolsets.text_lines`).

Outer ring: imports the standard library and the sibling ``text_lines`` module.
"""

from __future__ import annotations

import codecs
import re
from html import parser as _html_parser
from html.parser import HTMLParser
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urljoin, urlsplit

from .text_lines import TextLines

__all__ = ["decode_html", "decode_text", "html_to_text"]

MAX_NESTING = 6
MAX_URL_CHARS = 2048
MAX_TRACKED_LISTS = 100  # deeper lists are "- " lists: an entry costs more than "<ol>"

_DROP = frozenset({
    "script", "style", "noscript", "template", "svg", "math", "canvas", "iframe",
    "object", "embed", "select", "textarea",
})
_BLOCK = frozenset({
    "address", "article", "aside", "body", "details", "dialog", "div", "fieldset",
    "figcaption", "figure", "footer", "form", "header", "main", "nav", "p", "section",
    "summary", "table", "thead", "tbody", "tfoot", "caption", "dl", "center",
})
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_VOID = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr",
})
_WINDOWS_1252_ALIASES = frozenset({"iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1",
                                   "us-ascii", "ascii", "iso_8859-1", "cp819"})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_SPACE = re.compile(r"[ \t\n\r\f\v]+")
# The running parser's own comment end: unclosed means what it would rescan for.
_COMMENT_END = getattr(_html_parser, "commentclose", None) or re.compile(r"--!?\s*>")


def _codec(label: Optional[str]) -> Optional[str]:
    if not label:
        return None
    label = label.strip().strip("'\"").lower()
    if label in _WINDOWS_1252_ALIASES:
        return "cp1252"
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def _bom(data: bytes) -> Optional[Tuple[str, int]]:
    for bom, name in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                      (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return name, len(bom)
    return None


def decode_text(data: bytes, charset: Optional[str] = None) -> str:
    """Decode a text body: BOM, then ``charset``, then UTF-8, then windows-1252."""
    found = _bom(data)
    if found:
        return data[found[1]:].decode(found[0], errors="replace")
    codec = _codec(charset)
    if codec:
        return data.decode(codec, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def decode_html(data: bytes, charset: Optional[str] = None) -> str:
    """Decode an HTML body, honouring a ``<meta>`` charset when the header names none."""
    if not _bom(data) and not _codec(charset):
        match = _META_CHARSET.search(data[:2048])
        if match:
            charset = match.group(1).decode("ascii")
            # A page that says utf-16 in ASCII bytes is not utf-16 (WHATWG rule).
            if (_codec(charset) or "").startswith("utf-16"):
                charset = "utf-8"
    return decode_text(data, charset)


def _defuse(page: str) -> str:
    """``page`` with the openings that can never close written as text (see above)."""
    if "<![" in page:
        page = page.replace("<![", "&lt;![")
    end = page.rfind(">") + 1
    if page.find("<", end) >= 0:
        page = page[:end] + page[end:].replace("<", "&lt;")
    last_end = max((m.start() for m in _COMMENT_END.finditer(page)), default=-1)
    # A comment opened at i is closed only by an end that starts at i + 4 or later.
    cut = max(0, last_end - 3)
    if page.find("<!--", cut) >= 0:
        page = page[:cut] + page[cut:].replace("<!--", "&lt;!--")
    return page


def _list_start(value: Optional[str]) -> int:
    """An ``<ol start>``: up to six ASCII digits, else 1 (``int`` refuses long numbers)."""
    value = (value or "").strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 6 else 1


class _Converter(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base_url if len(base_url) <= MAX_URL_CHARS else ""
        self.out = TextLines()
        self.title: List[str] = []
        self.in_title = False
        self.dropping = ""  # the tag of the dropped element we are inside, if any
        self.drop_depth = 0  # how many elements of that tag are open
        self.pending = 0  # newlines owed before the next text
        self.fresh = True  # at the start of a line, after any prefix or list marker
        self.quote = 0
        self.list_depth = 0
        self.lists: List[List[Any]] = []  # [ordered, next number] per open list, the outer ones
        self.links: List[Dict[str, Any]] = []  # the open link, if any: links do not nest
        self.pre = 0
        self.pre_fresh = False
        self.fence_open = False
        self.fence_lang = ""
        self.cells = 0
        self.code = 0

    # -- output ---------------------------------------------------------------------

    def _prefix(self, item: bool = False) -> str:
        quote = min(self.quote, MAX_NESTING)
        depth = min(self.list_depth - (1 if item else 0), MAX_NESTING - quote)
        return "> " * quote + "  " * max(0, depth)

    def _break(self, n: int) -> None:
        if self.links:
            n = 0  # a block inside a link would tear the link apart
        if self.out.written and not self.fresh and n > self.pending:
            self.pending = n

    def _flush(self, item: bool = False) -> None:
        if self.pending:
            prefix = self._prefix(item)
            blank = "\n" + self._prefix().rstrip()
            self.out.write(blank * (self.pending - 1) + "\n" + prefix)
            self.pending = 0
            self.fresh = True

    def _write(self, text: str, marker: bool = False) -> None:
        if not text:
            return
        self._flush()
        for link in self.links:
            if not link["opened"]:
                self.out.write("[")
                link["opened"] = True
                text = text.lstrip(" ")
                if not text:
                    return
        self.out.write(text)
        self.fresh = marker

    def _close_link(self) -> None:
        link = self.links.pop()
        if link["opened"] and link["href"]:
            trailing = self.out.trim_spaces()
            self.out.write(f"]({link['href']})")
            if trailing:
                self.out.write(" ")

    # -- parser callbacks -----------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        a = dict(attrs)
        if self.dropping or tag in _DROP or ("hidden" in a and tag not in _VOID):
            if not self.dropping and tag not in _VOID:
                self.dropping, self.drop_depth = tag, 1
            elif tag == self.dropping:
                self.drop_depth += 1
            return
        if tag == "base" and a.get("href"):
            base = urljoin(self.base, a["href"])
            if len(base) <= MAX_URL_CHARS:
                self.base = base
        elif tag == "title":
            self.in_title = True
        elif self.pre:
            if tag == "code" and not self.fence_open and not self.fence_lang:
                self.fence_lang = _language(a.get("class") or "")
        elif tag in _HEADINGS:
            self._break(2)
            self._write("#" * _HEADINGS[tag] + " ", marker=True)
        elif tag in _BLOCK:
            self._break(2)
        elif tag in ("ul", "ol", "menu"):
            self._break(1 if self.list_depth else 2)
            self.list_depth += 1
            if self.list_depth <= MAX_TRACKED_LISTS:
                self.lists.append([tag == "ol", _list_start(a.get("start"))])
        elif tag == "li":
            self._break(1)
            marker = "- "
            if self.lists and self.list_depth == len(self.lists) and self.lists[-1][0]:
                marker = f"{self.lists[-1][1]}. "
                self.lists[-1][1] += 1
            self._flush(item=True)
            self._write(marker, marker=True)
        elif tag == "blockquote":
            self._break(2)
            self._flush()
            self.quote += 1
            if self.quote <= MAX_NESTING:
                self._write("> ", marker=True)
        elif tag == "pre":
            self._break(2)
            self.pre += 1
            self.pre_fresh = True
            self.fence_lang = _language(a.get("class") or "")
        elif tag == "br":
            self.out.write("\n" + self._prefix())
            self.fresh = True
        elif tag == "hr":
            self._break(2)
            self._write("---")
            self._break(2)
        elif tag == "tr":
            self._break(1)
            self.cells = 0
        elif tag in ("td", "th"):
            if self.cells:
                self._write(" | ")
            self.cells += 1
        elif tag in ("dt", "dd"):
            self._break(1)
            if tag == "dd":
                self._write("  ")
        elif tag == "a":
            if self.links:
                self._close_link()
            href = self._url(a.get("href"))
            # A link that goes nowhere useful (a fragment, javascript:) is just its text.
            self.links.append({"href": href, "opened": not href})
        elif tag == "img":
            alt = _SPACE.sub(" ", a.get("alt") or "").strip()
            if alt:
                src = self._url(a.get("src"))
                self._write(f"![{alt}]({src})" if src else f"![{alt}]")
        elif tag == "code":
            self.code += 1
            self._write("`")
        elif tag in ("strong", "b"):
            self._write("**")
        elif tag in ("em", "i"):
            self._write("*")

    def handle_startendtag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.dropping:
            if tag == self.dropping:
                self.drop_depth -= 1
                if not self.drop_depth:
                    self.dropping = ""
            return
        if tag == "title":
            self.in_title = False
        elif self.pre:
            if tag == "pre":
                self.pre -= 1
                if self.fence_open:
                    if self.out.last != "\n":
                        self.out.write("\n")
                    self.out.write(self._prefix() + "```")
                    self.fence_open = False
                    self.out.verbatim = False
                self.fence_lang = ""
                self._break(2)
        elif tag in _HEADINGS or tag in _BLOCK:
            self._break(2)
        elif tag == "blockquote":
            self.quote = max(0, self.quote - 1)
            self._break(2)
        elif tag in ("ul", "ol", "menu"):
            if self.list_depth:
                if len(self.lists) == self.list_depth:
                    self.lists.pop()
                self.list_depth -= 1
            self._break(1 if self.list_depth else 2)
        elif tag in ("li", "tr", "dt", "dd"):
            self._break(1)
        elif tag == "a" and self.links:
            self._close_link()
        elif tag == "code" and self.code:
            self.code -= 1
            self._write("`")
        elif tag in ("strong", "b"):
            self._write("**")
        elif tag in ("em", "i"):
            self._write("*")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
            return
        if self.dropping:
            return
        if self.pre:
            if self.pre_fresh:
                # HTML ignores one newline straight after <pre>.
                data = data[1:] if data.startswith("\n") else data
                if not data:
                    return
                self.pre_fresh = False
            if not self.fence_open:
                self._write("```" + self.fence_lang + "\n" + self._prefix())
                self.fence_open = True
                self.out.verbatim = True
            prefix = self._prefix()
            self.out.write(data.replace("\n", "\n" + prefix) if prefix else data)
            return
        text = _SPACE.sub(" ", data)
        if self.pending or self.out.last in (" ", "\n"):
            text = text.lstrip(" ")
        self._write(text)

    def _url(self, href: Optional[str]) -> str:
        href = (href or "").strip()
        if not href or href.startswith("#"):
            return ""
        if len(href) > MAX_URL_CHARS:
            return ""
        url = urljoin(self.base, href)
        if len(url) > MAX_URL_CHARS or urlsplit(url).scheme.lower() in (
                "javascript", "data", "vbscript"):
            return ""
        return url

    def result(self) -> str:
        return self.out.text()


def _language(classes: str) -> str:
    for name in classes.split():
        for prefix in ("language-", "lang-"):
            if name.startswith(prefix) and len(name) > len(prefix):
                return name[len(prefix):]
    return ""


def html_to_text(html: str, base_url: str = "") -> Tuple[str, str]:
    """Convert an HTML document to readable Markdown-flavoured text.

    Returns ``(title, text)``; links and image sources are made absolute against
    ``base_url`` (or the page's ``<base href>``).
    """
    converter = _Converter(base_url)
    # One feed: html.parser rescans whatever it holds back between feeds.
    converter.feed(_defuse(html))
    converter.close()
    title = _SPACE.sub(" ", "".join(converter.title)).strip()
    return title, converter.result()
