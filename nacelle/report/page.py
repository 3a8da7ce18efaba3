"""The run report's page: its CSS, its shell, and conversations as HTML.

:mod:`nacelle.report` builds the timeline and the tables; this module holds what
does not depend on a recording — the stylesheet, the ``<html>`` around a body, and
:func:`messages_html`, the transcript, which ``nacelle.console.html`` shares so a
notebook and a report show a conversation the same way.

Everything shown is escaped: a recording holds what models and tools wrote, which
is untrusted. The page also carries a Content-Security-Policy that allows no
network at all (no ``default-src``, no scripts, images only as ``data:``), so even a
rendering bug cannot make the page fetch anything.

Messages come as JSON objects, in either of two shapes: ``nacelle.messages.dumps``'s
(each part has a ``type``), or a Recorder's (a part is its dataclass fields, with no
``type``; the kind is told by which fields it has). Anything else is shown as JSON.

Images and documents (a user's own, or what a tool returned) are shown by
:func:`media_html`. An image is an ``<img>`` whose source is a ``data:`` URL — the
one kind of image the policy lets in — but only for PNG, JPEG, GIF and WebP: an SVG
is a document that can hold script and links, and a media type is text someone
else wrote, so nothing but those four names (and base64 data, checked, never
decoded) goes into the URL. A PDF or a plain-text document is a link named by its
title that saves the file (``download``: a page may not open a ``data:`` URL itself,
https://developer.mozilla.org/en-US/docs/Web/URI/Reference/Schemes/data); anything
else is a line naming the media type and size. The data is written once: a thumbnail
is the image scaled by CSS, and the browser's own "open image" shows it whole.

Outer ring: imports the standard library, ``bounded_json`` and ``messages``.
"""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any, List, Mapping, Sequence

from .. import bounded_json
from ..messages import decoded_size

__all__ = ["CSS", "e", "media_html", "messages_html", "page"]

CSS = """
:root{--fg:#1d2430;--mute:#5c6778;--line:#d9dee6;--bg:#fff;--soft:#f4f6f9;
--req:#3b6fd8;--tool:#2f9e6b;--bad:#d0453a;--mark:#f0a020}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--fg);background:var(--bg)}
main{max-width:1200px;margin:0 auto;padding:16px}
h1{font-size:20px;margin:0 0 4px;overflow-wrap:anywhere}h2{font-size:16px;margin:24px 0 8px}
.run{border-top:2px solid var(--line);padding-top:8px;margin-top:16px}
.meta{color:var(--mute);margin:0 0 8px;overflow-wrap:anywhere}
.meta b{color:var(--fg)}
.bad{color:var(--bad)}
.timeline{border:1px solid var(--line);border-radius:6px;padding:8px;background:var(--soft)}
.row{display:flex;align-items:center;min-height:24px}
.label{flex:0 0 150px;padding-right:8px;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis;color:var(--mute);font-size:12px}
.track{position:relative;flex:1 1 auto;height:20px;min-width:0}
.axis .track{height:18px;border-bottom:1px solid var(--line)}
.tick{position:absolute;bottom:0;white-space:nowrap;font-size:11px;color:var(--mute);
border-left:1px solid var(--line);padding-left:2px;height:100%}
.bar{position:absolute;top:3px;height:14px;min-width:1px;border-radius:3px;
overflow:hidden;white-space:nowrap;font-size:11px;line-height:14px;color:#fff;padding:0 3px}
.request{background:var(--req)}.tool{background:var(--tool)}
.bar.failed{background:var(--bad)}.bar.open{opacity:.5}
.ttft,.retry{position:absolute;top:0;height:20px;width:2px;margin-left:-1px}
.ttft{background:var(--fg)}.retry{background:var(--mark);width:4px;margin-left:-2px}
.legend{font-size:12px;color:var(--mute);margin:6px 0 0}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;
vertical-align:-1px;margin:0 4px 0 10px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;width:100%}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th:first-child,td:first-child,th.l,td.l{text-align:left}
tfoot td{font-weight:600}
.note{font-size:12px;color:var(--mute)}
.msg{border-left:3px solid var(--line);padding:4px 10px;margin:8px 0}
.msg.assistant{border-color:var(--req)}
.role{font-size:12px;font-weight:600;color:var(--mute);text-transform:uppercase}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
details{margin:4px 0;background:var(--soft);border-radius:4px;padding:2px 8px}
summary{cursor:pointer;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0;font-size:12px;
font-family:ui-monospace,Menlo,Consolas,monospace}
.tag{font-size:11px;color:var(--mute)}
.media{margin:6px 0}.media img{display:block;max-width:min(100%,480px);max-height:360px;
border:1px solid var(--line);border-radius:4px;background:var(--soft)}
.media figcaption{font-size:11px;color:var(--mute)}
@media (max-width:600px){
main{padding:8px}
.row{flex-wrap:wrap}
.label{flex:1 0 100%;padding:2px 0 0}
.track{flex:1 0 100%}
.row.axis .label{display:none}
th,td{padding:3px 5px;font-size:12px}
}
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def e(value: Any) -> str:
    """``value`` as text, escaped for HTML text and quoted attributes."""
    return escape(value if isinstance(value, str) else str(value), quote=True)


def page(title: str, body: str) -> str:
    """A whole self-contained page around ``body`` (already HTML)."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{e(title)}</title><style>{CSS}</style></head>"
            f"<body><main>{body}</main></body></html>\n")


def messages_html(messages: Sequence[Any]) -> str:
    """A conversation (JSON objects; see the module docstring) as HTML, tool inputs
    and results in ``<details>``."""
    out: List[str] = []
    for message in messages:
        if not isinstance(message, Mapping):
            out.append(f'<div class="msg"><pre>{e(_json(message))}</pre></div>')
            continue
        role = message.get("role")
        role = role if role in ("user", "assistant") else "other"
        parts = message.get("parts")
        shown = [_part(p) for p in parts] if isinstance(parts, list) else [
            f"<pre>{e(_json(parts))}</pre>"]
        out.append(f'<div class="msg {role}"><div class="role">{e(role)}</div>'
                   f'{"".join(shown)}</div>')
    return "".join(out)


def _part(part: Any) -> str:
    if not isinstance(part, Mapping):
        return f"<pre>{e(_json(part))}</pre>"
    kind = part.get("type") or _kind(part)
    if kind == "text":
        return f'<div class="text">{e(part.get("text", ""))}</div>{_citations(part)}'
    if kind == "reasoning":
        return _details("thinking", e(part.get("text", "")))
    if kind == "tool_call":
        cut = "" if part.get("finished", True) else " (cut short)"
        return _details(f"&rarr; {e(part.get('name', ''))}{cut} "
                        f'<span class="tag">{e(part.get("id", ""))}</span>',
                        e(_pretty(part.get("input", ""))))
    if kind == "tool_result":
        status = '<span class="bad">failed</span>' if part.get("failed") else "ok"
        content = part.get("content")
        media = "".join(media_html(p) for p in content if _is_media(p)) \
            if isinstance(content, list) else ""
        return _details(f"&larr; {e(part.get('name', ''))} {status}",
                        e(part.get("result", ""))) + media
    if kind == "finish":
        return f'<div class="tag">stop: {e(part.get("stop", ""))}</div>'
    if kind in ("image", "document"):
        return media_html(part)
    if kind == "provider_block":
        return _details(f"provider block ({e(part.get('protocol', ''))})",
                        e(_pretty(part.get("data", ""))))
    return f"<pre>{e(_json(part))}</pre>"


def _kind(part: Mapping[str, Any]) -> str:
    """A Recorder part's kind, told by its fields (they are distinct per class)."""
    keys = set(part)
    if "result" in keys:
        return "tool_result"
    if "input" in keys:
        return "tool_call"
    if "media_type" in keys:
        return "document" if "title" in keys else "image"
    if "stop" in keys:
        return "finish"
    if "state" in keys:
        return "reasoning"
    if "protocol" in keys:
        return "provider_block"
    return "text" if "text" in keys else ""


#: The image types shown as pictures; each is a raster format that runs nothing.
_PICTURES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: The document types offered as a file to save, with the file name's ending.
_FILES = {"application/pdf": ".pdf", "text/plain": ".txt"}
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_UNSAFE_NAME = re.compile(r"[^\w .()-]+")


def media_html(part: Mapping[str, Any]) -> str:
    """An image or a document part (either JSON shape) as HTML: a picture, a link
    that saves the file, or a line naming it (see the module docstring)."""
    kind = part.get("type") or _kind(part)
    media_type = part.get("media_type")
    media_type = media_type if isinstance(media_type, str) else ""
    data = part.get("data")
    data = data if isinstance(data, str) and _BASE64.fullmatch(data) else None
    size = f"{decoded_size(data):,} bytes" if data is not None else "unreadable data"
    if kind == "image":
        note = f"image {media_type}, {size}"
        if data is not None and media_type in _PICTURES:
            return (f'<figure class="media"><img src="data:{media_type};base64,{data}" '
                    f'alt="{e(note)}"><figcaption>{e(note)}</figcaption></figure>')
        return f'<div class="tag media">[{e(note)}]</div>'
    title = part.get("title")
    title = title if isinstance(title, str) and title.strip() else "document"
    note = f"{media_type}, {size}"
    ending = _FILES.get(media_type)
    if data is None or ending is None:
        return f'<div class="tag media">[document {e(title)}: {e(note)}]</div>'
    name = _UNSAFE_NAME.sub("_", title).strip(" .")[:100] or "document"
    name += "" if name.lower().endswith(ending) else ending
    return (f'<div class="media">document <a href="data:{media_type};base64,{data}" '
            f'download="{e(name)}">{e(title)}</a> <span class="tag">{e(note)}</span></div>')


def _is_media(part: Any) -> bool:
    return isinstance(part, Mapping) and (part.get("type") or _kind(part)) in ("image", "document")


def _citations(part: Mapping[str, Any]) -> str:
    """A Text part's cited sources, numbered: the title linked to its page when the URL
    is http(s) (any other scheme is shown as text, never a link), the quoted text
    under it; everything escaped."""
    cited = part.get("citations")
    if not isinstance(cited, list) or not cited:
        return ""
    items = []
    for citation in cited:
        if not isinstance(citation, Mapping):
            continue
        url, title, quote = (str(citation.get(k) or "") for k in ("url", "title", "cited_text"))
        name = e(title or url or "source")
        link = (f'<a href="{e(url)}" rel="noopener noreferrer">{name}</a>'
                if url.startswith(("https://", "http://")) else name)
        items.append(f"<li>{link}" + (f"<br><q>{e(quote)}</q>" if quote else "") + "</li>")
    return f'<ol class="citations">{"".join(items)}</ol>' if items else ""


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary><pre>{body}</pre></details>"


def _pretty(raw: Any) -> str:
    """Tool input (raw JSON text) indented when it parses, as written when not."""
    if not isinstance(raw, str):
        return _json(raw)
    try:
        return json.dumps(bounded_json.loads(raw, what="tool input"), indent=2,
                          ensure_ascii=False)
    except ValueError:
        return raw


def _json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=repr)
    except (ValueError, RecursionError):
        return repr(value)
