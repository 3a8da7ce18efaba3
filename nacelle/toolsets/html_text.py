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
real pages without building a tree. Outer ring: imports the standard library only.
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser
from typing import Dict, List, Optional, Tuple
from urllib.parse import urljoin, urlsplit

__all__ = ["decode_html", "decode_text", "html_to_text"]

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


class _Converter(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base_url
        self.out: List[str] = []
        self.title: List[str] = []
        self.in_title = False
        self.dropping: List[str] = []  # open tags inside a dropped element
        self.pending = 0  # newlines owed before the next text
        self.fresh = True  # at the start of a line, after any prefix or list marker
        self.quote = 0
        self.lists: List[List] = []  # [ordered, next number] per open list
        self.links: List[Dict] = []
        self.pre = 0
        self.pre_fresh = False
        self.fence_open = False
        self.fence_lang = ""
        self.cells = 0
        self.code = 0

    # -- output ---------------------------------------------------------------------

    def _prefix(self, item: bool = False) -> str:
        depth = len(self.lists) - (1 if item else 0)
        return "> " * self.quote + "  " * max(0, depth)

    def _break(self, n: int) -> None:
        if self.links:
            n = 0  # a block inside a link would tear the link apart
        if self.out and not self.fresh and n > self.pending:
            self.pending = n

    def _flush(self, item: bool = False) -> None:
        if self.pending:
            prefix = self._prefix(item)
            blank = "\n" + self._prefix().rstrip()
            self.out.append(blank * (self.pending - 1) + "\n" + prefix)
            self.pending = 0
            self.fresh = True

    def _write(self, text: str, marker: bool = False) -> None:
        if not text:
            return
        self._flush()
        for link in self.links:
            if not link["opened"]:
                self.out.append("[")
                link["opened"] = True
                text = text.lstrip(" ")
                if not text:
                    return
        self.out.append(text)
        self.fresh = marker

    def _last_char(self) -> str:
        return self.out[-1][-1:] if self.out else "\n"

    # -- parser callbacks -----------------------------------------------------------

    def handle_starttag(self, tag: str, attrs) -> None:
        a = dict(attrs)
        if self.dropping or tag in _DROP or ("hidden" in a and tag not in _VOID):
            if tag not in _VOID:
                self.dropping.append(tag)
            return
        if tag == "base" and a.get("href"):
            self.base = urljoin(self.base, a["href"])
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
            self._break(1 if self.lists else 2)
            start = (a.get("start") or "1").strip()
            self.lists.append([tag == "ol", int(start) if start.isdigit() else 1])
        elif tag == "li":
            self._break(1)
            marker = "- "
            if self.lists and self.lists[-1][0]:
                marker = f"{self.lists[-1][1]}. "
                self.lists[-1][1] += 1
            self._flush(item=True)
            self._write(marker, marker=True)
        elif tag == "blockquote":
            self._break(2)
            self._flush()
            self.quote += 1
            self._write("> ", marker=True)
        elif tag == "pre":
            self._break(2)
            self.pre += 1
            self.pre_fresh = True
            self.fence_lang = _language(a.get("class") or "")
        elif tag == "br":
            self.out.append("\n" + self._prefix())
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

    def handle_startendtag(self, tag: str, attrs) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.dropping:
            if tag in self.dropping:
                while self.dropping.pop() != tag:
                    pass
            return
        if tag == "title":
            self.in_title = False
        elif self.pre:
            if tag == "pre":
                self.pre -= 1
                if self.fence_open:
                    if not self.out[-1].endswith("\n"):
                        self.out.append("\n")
                    self.out.append(self._prefix() + "```")
                    self.fence_open = False
                self.fence_lang = ""
                self._break(2)
        elif tag in _HEADINGS or tag in _BLOCK:
            self._break(2)
        elif tag == "blockquote":
            self.quote = max(0, self.quote - 1)
            self._break(2)
        elif tag in ("ul", "ol", "menu"):
            if self.lists:
                self.lists.pop()
            self._break(1 if self.lists else 2)
        elif tag in ("li", "tr", "dt", "dd"):
            self._break(1)
        elif tag == "a" and self.links:
            link = self.links.pop()
            if link["opened"] and link["href"]:
                trailing = self.out[-1] != self.out[-1].rstrip(" ")
                self.out[-1] = self.out[-1].rstrip(" ")
                self.out.append(f"]({link['href']})")
                if trailing:
                    self.out.append(" ")
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
            prefix = self._prefix()
            self.out.append(data.replace("\n", "\n" + prefix) if prefix else data)
            return
        text = _SPACE.sub(" ", data)
        if self.pending or self._last_char() in (" ", "\n", ""):
            text = text.lstrip(" ")
        self._write(text)

    def _url(self, href: Optional[str]) -> str:
        href = (href or "").strip()
        if not href or href.startswith("#"):
            return ""
        url = urljoin(self.base, href)
        if urlsplit(url).scheme.lower() in ("javascript", "data", "vbscript"):
            return ""
        return url

    def result(self) -> str:
        text = "\n".join(line.rstrip() for line in "".join(self.out).split("\n"))
        text = _squeeze(text).strip("\n")
        return text + "\n" if text else ""


def _squeeze(text: str) -> str:
    """Collapse runs of blank lines outside fenced code, keeping code verbatim."""
    parts = re.split(r"(^```.*?^\s*```$)", text, flags=re.M | re.S)
    return "".join(p if i % 2 else re.sub(r"\n{3,}", "\n\n", p) for i, p in enumerate(parts))


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
    converter.feed(html)
    converter.close()
    title = _SPACE.sub(" ", "".join(converter.title)).strip()
    return title, converter.result()
