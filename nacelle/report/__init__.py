"""A recorded run as one self-contained HTML page: :func:`html` and :func:`write`.

The page reads a :class:`nacelle.observe.Recorder` file and shows, per run:

- a timeline, to scale, from the run's first observation to its last: one lane per
  model request (a bar from ``request.start`` to ``request.end``, a dark tick at the
  time to first token, an orange tick at each retry, red when the request failed,
  faded when it never ended), and under each request the tool calls of that turn —
  calls that overlapped in time get lanes of their own, so concurrency is visible. A
  tool bar's width is its recorded ``duration`` on the page's scale, and it carries
  ``data-duration`` (seconds), which is what the browser test measures;
- tokens and cost per request: input, output, cache reads, cache writes, dollars,
  and what the cache saved (below);
- the transcript, tool inputs and results folded in ``<details>``; the images a
  user sent or a tool returned as pictures, their documents as links that save the
  file (``page.media_html``).

Choices where the brief is silent:

- A file may hold several runs (a Recorder appends). ``run_id=None`` shows every run,
  in file order, each in its own section — a file of three runs is one page to scroll,
  not three commands; ``run_id=`` picks one (an unknown id is a ValueError naming the
  ids the file holds).
- "What the cache saved" is ``Usage.cost_without_cache - cost``. A Recorder writes a
  Usage's public fields, which leave out the no-cache figure, so the report prices the
  request's tokens again from ``nacelle.pricing`` and shows the saving only when that
  gives back the recorded cost to the pico-dollar; otherwise (a provider-reported
  cost, a custom price, one-hour cache writes) it shows "–" rather than a guess.
- The transcript is the conversation of the run's DONE event; a run that raised has
  none, so it is the starting conversation followed by what the stream showed.
- Requests are numbered in order; a request rerun by ``Retry`` (a ``"turn"``-level
  retry) keeps its turn's number. A tool call belongs to the last request that ended
  before it started.
- Sub-agents: a sub-agent's run is recorded under a run id of its own whose
  ``run.start`` names its parent run and call (``parent_run``, ``via``). Its turns
  and tools are drawn in the parent's timeline, on the parent's scale, as lanes
  indented under the lane of the call that started it (a grandchild's under its
  parent's, and so on; each such row carries ``data-agent``, the path of sub-agent
  names), and it has a section of its own after its parent's (its tokens and its
  transcript), titled as the sub-agent it is. The parent's transcript keeps its own
  conversation: the forwarded events of a sub-agent (``agent`` set) are its run's,
  not the parent's. ``run_id=`` of a parent shows its sub-agents too. The page
  counts a file's top-level runs.
- Everything from the recording is escaped; the page loads nothing (its CSP allows
  no network), holds no script, and uses the reader's system font.

Outer ring in spirit (nothing imports it but the CLI); imports the standard
library and ``observe``, ``events``, ``pricing`` and ``page`` (beside it).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..events import Usage
from ..observe import load
from ..pricing import price_for
from .page import e, messages_html, page

__all__ = ["html", "write"]

_COUNT_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")


def html(path: "os.PathLike[str] | str", *, run_id: Optional[str] = None) -> str:
    """The report page for the recording at ``path`` (every run, or ``run_id``'s)."""
    grouped = _group(load(path))
    if run_id is not None and run_id not in grouped:
        known = ", ".join(grouped) or "none"
        raise ValueError(f"{os.fspath(path)} holds no run {run_id!r} (runs: {known})")
    parsed = {rid: _parse(rid, records) for rid, records in grouped.items()}
    kids: Dict[Tuple[str, str], List[_Run]] = {}
    for run in parsed.values():
        parent = _text(run.info.get("parent_run"))
        if parent in parsed and parent != run.run_id:
            kids.setdefault((parent, _text(run.info.get("via"))), []).append(run)
    nested = {child.run_id for children in kids.values() for child in children}
    tops = [run_id] if run_id is not None else [rid for rid in parsed if rid not in nested]
    sections = []
    for top in tops:
        for run, path_of in _tree(parsed[top], kids):
            sections.append(_section(run, kids, path_of))
    runs = tops
    head = f"<h1>nacelle run report</h1><p class=\"meta\">{e(os.path.basename(path))}"
    head += f" &middot; {len(runs)} run{'s' if len(runs) != 1 else ''}</p>"
    if not runs:
        head += '<p class="meta">The recording holds no run.</p>'
    return page(f"nacelle run report: {os.path.basename(path)}", head + "".join(sections))


def write(path: "os.PathLike[str] | str", out: "os.PathLike[str] | str", *,
          run_id: Optional[str] = None) -> None:
    """Write :func:`html`'s page for ``path`` to the file ``out`` (UTF-8)."""
    text = html(path, run_id=run_id)
    with open(out, "w", encoding="utf-8") as file:
        file.write(text)


# -- reading a run ----------------------------------------------------------------------


@dataclass
class _Request:
    turn: int
    start: float
    model: str = ""
    provider: str = ""
    end: Optional[float] = None
    ttft: Optional[float] = None
    status: Any = None
    stop: str = ""
    usage: Optional[Mapping[str, Any]] = None
    error: Any = None
    retries: List[Tuple[float, str]] = field(default_factory=list)


@dataclass
class _Tool:
    turn: int
    start: float
    name: str
    id: str = ""
    duration: Optional[float] = None
    end: Optional[float] = None
    error: Any = None
    lane: int = 0


@dataclass
class _Run:
    run_id: str
    start: float = 0.0
    end: float = 0.0
    info: Mapping[str, Any] = field(default_factory=dict)
    finish: Mapping[str, Any] = field(default_factory=dict)
    requests: List[_Request] = field(default_factory=list)
    tools: List[_Tool] = field(default_factory=list)
    messages: Optional[List[Any]] = None
    streamed: List[Any] = field(default_factory=list)
    compactions: List[Tuple[int, str, Any, Any]] = field(default_factory=list)


def _tree(run: _Run, kids: Mapping[Tuple[str, str], List[_Run]],
          path: Tuple[str, ...] = (), seen: Optional[Set[str]] = None,
          ) -> List[Tuple[_Run, Tuple[str, ...]]]:
    """``run`` and its sub-agents' runs, depth first, each with its path of names."""
    seen = set() if seen is None else seen
    if run.run_id in seen:  # a recording that names its own descendant as parent
        return []
    seen.add(run.run_id)
    found = [(run, path)]
    for tool in run.tools:
        for child in kids.get((run.run_id, tool.id), ()):
            found += _tree(child, kids, path + (_agent_name(child),), seen)
    return found


def _agent_name(run: _Run) -> str:
    return _text(run.info.get("agent")) or "sub-agent"


def _group(records: Sequence[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    runs: Dict[str, List[Dict[str, Any]]] = {}
    for record in records:
        runs.setdefault(record["run_id"], []).append(record)
    return runs


def _parse(run_id: str, records: Sequence[Mapping[str, Any]]) -> _Run:
    times = [float(r["time"]) for r in records if math.isfinite(r["time"])]
    run = _Run(run_id, min(times, default=0.0), max(times, default=0.0))
    requests: Dict[Any, _Request] = {}
    tools: Dict[Any, _Tool] = {}
    open_request: Optional[_Request] = None
    rerun = False
    for record in records:
        kind, at, data = record["kind"], float(record["time"]), record["data"]
        span = _key(data.get("span"))
        if kind == "run.start":
            run.info = data
        elif kind == "run.end":
            run.finish = data
        elif kind == "request.start":
            turn = (run.requests[-1].turn if rerun and run.requests else
                    (run.requests[-1].turn + 1 if run.requests else 1))
            open_request = _Request(turn, at, _text(data.get("model")), _text(data.get("provider")))
            requests[span] = open_request
            run.requests.append(open_request)
            rerun = False
        elif kind == "request.end" and span in requests:
            request = requests[span]
            request.end, request.ttft = at, _number(data.get("ttft"))
            request.status, request.stop = data.get("status"), _text(data.get("stop"))
            request.error = data.get("error")
            usage = data.get("usage")
            request.usage = usage if isinstance(usage, Mapping) else None
            open_request = None
        elif kind == "request.retry":
            note = f"retry after attempt {data.get('attempt')}: {_error(data.get('error'))}"
            delay = _number(data.get("delay"))
            if delay is not None:
                note += f" (waited {delay:.2f} s)"
            target = open_request or (run.requests[-1] if run.requests else None)
            if target is not None:
                target.retries.append((at, note))
            rerun = data.get("level") == "turn"
        elif kind == "tool.start":
            turn = run.requests[-1].turn if run.requests else 0
            tool = _Tool(turn, at, _text(data.get("name")), _text(data.get("id")))
            tools[span] = tool
            run.tools.append(tool)
        elif kind == "tool.end" and span in tools:
            tool = tools[span]
            tool.end, tool.duration = at, _number(data.get("duration"))
            tool.error = data.get("error")
        elif kind == "event":
            _event(run, data.get("event"))
    _joined(run.streamed)
    _assign_lanes(run.tools)
    return run


def _joined(streamed: List[Any]) -> None:
    """Make each streamed text part's list of deltas its text."""
    for part in streamed:
        if part.get("type") == "text":
            part["text"] = "".join(part["text"])


def _event(run: _Run, event: Any) -> None:
    """Keep what the transcript needs from one recorded Event."""
    if not isinstance(event, Mapping):
        return
    kind = event.get("kind")
    if event.get("agent"):
        return  # a sub-agent's, forwarded: its own run records it
    if kind == "done" and isinstance(event.get("messages"), list):
        run.messages = event["messages"]
    elif kind == "text" and isinstance(event.get("text"), str):
        # The deltas are kept as a list and joined once, by _joined: adding each to
        # the text so far copies it every time, the square of a long answer.
        if run.streamed and run.streamed[-1].get("type") == "text":
            run.streamed[-1]["text"].append(event["text"])
        else:
            run.streamed.append({"type": "text", "text": [event["text"]]})
    elif kind == "compaction" and isinstance(event.get("compaction"), Mapping):
        done = event["compaction"]
        turn = run.requests[-1].turn if run.requests else 0
        run.compactions.append((turn, _text(done.get("strategy")), done.get("removed"),
                                done.get("tokens")))
    elif kind in ("tool_call", "tool_result") and isinstance(event.get("tool"), Mapping):
        tool = event["tool"]
        if kind == "tool_call":
            run.streamed.append({"type": "tool_call", "id": tool.get("id"),
                                 "name": tool.get("name"), "input": tool.get("input")})
        else:
            failed = tool.get("error") is not None
            run.streamed.append({"type": "tool_result", "id": tool.get("id"),
                                 "name": tool.get("name"), "failed": failed,
                                 "result": tool.get("error") if failed else tool.get("result"),
                                 "content": tool.get("content")})


def _assign_lanes(tools: Sequence[_Tool]) -> None:
    """Per turn, the first lane free when a call starts (interval partitioning), so
    calls that overlapped never share a lane and sequential ones do."""
    ends: Dict[int, List[float]] = {}
    for tool in sorted(tools, key=lambda t: t.start):
        lanes = ends.setdefault(tool.turn, [])
        finish = _tool_end(tool)
        for lane, busy_until in enumerate(lanes):
            if busy_until <= tool.start:
                tool.lane, lanes[lane] = lane, finish
                break
        else:
            tool.lane = len(lanes)
            lanes.append(finish)


def _tool_end(tool: _Tool) -> float:
    if tool.end is not None:
        return tool.end
    return tool.start + (tool.duration or 0.0)


def _key(value: Any) -> Any:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _number(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _error(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"{_text(value.get('type'))}: {_text(value.get('message'))}"
    return _text(value)


# -- rendering a run --------------------------------------------------------------------


_Kids = Mapping[Tuple[str, str], List[_Run]]


def _section(run: _Run, kids: _Kids, path: Tuple[str, ...] = ()) -> str:
    if path:  # a sub-agent: drawn in its parent's timeline
        return (f'<section class="run sub-agent" id="run-{e(run.run_id)}">{_header(run, path)}'
                f"<h2>Tokens and cost</h2>{_table(run)}"
                f"<h2>Transcript</h2>{_transcript(run)}</section>")
    return (f'<section class="run" id="run-{e(run.run_id)}">{_header(run)}'
            f"<h2>Timeline</h2>{_timeline(run, kids)}<h2>Tokens and cost</h2>{_table(run)}"
            f"<h2>Transcript</h2>{_transcript(run)}</section>")


def _header(run: _Run, path: Tuple[str, ...] = ()) -> str:
    info, finish = run.info, run.finish
    stop = _text(finish.get("stop")) if finish else ""
    parts = [f"<b>{e(info.get('model', '') or 'unknown model')}</b>",
             f"backend {e(info.get('backend', ''))}", f"{run.end - run.start:.2f} s",
             f"{len(run.requests)} request{'s' if len(run.requests) != 1 else ''}",
             f"{len(run.tools)} tool call{'s' if len(run.tools) != 1 else ''}"]
    if not finish:
        parts.append('<span class="bad">no run.end: the run did not finish</span>')
    elif finish.get("error") is not None:
        parts.append(f'<span class="bad">raised {e(_error(finish.get("error")))}</span>')
    else:
        parts.append(f"stop <b>{e(stop)}</b>")
    tools = info.get("tools")
    names = ", ".join(_text(t[0]) for t in tools if isinstance(t, list) and t) \
        if isinstance(tools, list) else ""
    system = _text(info.get("system"))
    extra = f"<details><summary>system prompt{f' and tools: {e(names)}' if names else ''}" \
            f"</summary><pre>{e(system)}</pre></details>" if system or names else ""
    if path:
        title = (f"<h1>Sub-agent {e(' > '.join(path))} <code>{e(run.run_id)}</code></h1>"
                 f'<p class="meta">started by call <code>{e(_text(run.info.get("via")))}'
                 f'</code> of run <a href="#run-{e(_text(run.info.get("parent_run")))}">'
                 f'<code>{e(_text(run.info.get("parent_run")))}</code></a></p>')
    else:
        title = f"<h1>Run <code>{e(run.run_id)}</code></h1>"
    return f'{title}<p class="meta">{" &middot; ".join(parts)}</p>{extra}'


def _timeline(run: _Run, kids: _Kids) -> str:
    span = max(run.end - run.start, 1e-6)

    def x(at: float) -> float:
        return max(0.0, min(100.0, (at - run.start) / span * 100))

    rows = [_axis(span)] + _lanes(run, x, span, kids, ())
    legend = ('<p class="legend"><i style="background:var(--req)"></i>request'
              '<i style="background:var(--tool)"></i>tool call'
              '<i style="background:var(--bad)"></i>failed'
              '<i style="background:var(--fg);width:2px"></i>first token'
              '<i style="background:var(--mark);width:4px"></i>retry</p>')
    return f'<div class="timeline">{"".join(rows)}{legend}</div>'


def _lanes(run: _Run, x: Any, span: float, kids: _Kids, path: Tuple[str, ...],
           seen: Optional[Set[str]] = None) -> List[str]:
    """The run's request lanes, each turn's tool lanes under it, and under a call that
    started a sub-agent that sub-agent's lanes, indented (``path``: its names)."""
    seen = set() if seen is None else seen
    seen.add(run.run_id)
    pad = "&nbsp;&nbsp;" * 2 * len(path)
    who = f"{e(path[-1])} &middot; " if path else ""
    nested = f' data-agent="{e("/".join(path))}"' if path else ""
    rows = []
    for request in run.requests:
        end = request.end if request.end is not None else run.end
        classes = "bar request" + (" failed" if request.error is not None else "") + \
            ("" if request.end is not None else " open")
        title = f"turn {request.turn} {request.model}: {end - request.start:.3f} s"
        if request.ttft is not None:
            title += f", first token after {request.ttft:.3f} s"
        if request.error is not None:
            title += f", failed: {_error(request.error)}"
        marks = [_bar(classes, x(request.start), x(end) - x(request.start), title,
                      f"{end - request.start:.2f} s")]
        if request.ttft is not None:
            marks.append(f'<span class="ttft" style="left:{x(request.start + request.ttft):.4f}%"'
                         f' title="time to first token {request.ttft:.3f} s"></span>')
        marks += [f'<span class="retry" style="left:{x(at):.4f}%" title="{e(note)}"></span>'
                  for at, note in request.retries]
        label = pad + who + f"turn {request.turn}" + (
            f" &middot; {e(request.model)}" if request.model else "")
        rows.append(_row(label, "".join(marks), "request-lane", nested))
        if request is _last_of_turn(run, request):
            rows += _tool_rows(run, request.turn, x, span, kids, path, seen)
    # calls before any request: a resumed run
    rows += _tool_rows(run, 0, x, span, kids, path, seen)
    return rows


def _last_of_turn(run: _Run, request: _Request) -> _Request:
    return [r for r in run.requests if r.turn == request.turn][-1]


def _tool_rows(run: _Run, turn: int, x: Any, span: float, kids: _Kids,
               path: Tuple[str, ...], seen: Set[str]) -> List[str]:
    calls = [t for t in run.tools if t.turn == turn]
    pad = "&nbsp;&nbsp;" * (2 * len(path) + 1)
    nested = f' data-agent="{e("/".join(path))}"' if path else ""
    rows = []
    for lane in range(max((t.lane for t in calls), default=-1) + 1):
        in_lane = [t for t in calls if t.lane == lane]
        bars = []
        for tool in in_lane:
            duration = tool.duration if tool.duration is not None else \
                _tool_end(tool) - tool.start
            width = min(duration / span * 100, 100.0 - x(tool.start))
            failed = " failed" if tool.error is not None else ""
            open_ = "" if tool.end is not None else " open"
            title = f"{tool.name}: {duration:.3f} s" + (
                f", failed: {_text(tool.error)[:200]}" if failed else "")
            bars.append(_bar(f"bar tool{failed}{open_}", x(tool.start), width, title,
                             f"{tool.name} {duration:.2f} s", duration))
        label = ", ".join(dict.fromkeys(t.name for t in in_lane))
        rows.append(_row(f"{pad}{e(label)}", "".join(bars), "tool-lane", nested))
        for tool in in_lane:
            for child in kids.get((run.run_id, tool.id), ()):
                if child.run_id not in seen:
                    rows += _lanes(child, x, span, kids, path + (_agent_name(child),), seen)
    return rows


def _bar(classes: str, left: float, width: float, title: str, text: str,
         duration: Optional[float] = None) -> str:
    data = f' data-duration="{duration:.6f}"' if duration is not None else ""
    return (f'<span class="{classes}"{data} style="left:{left:.4f}%;width:{max(width, 0.0):.4f}%"'
            f' title="{e(title)}">{e(text)}</span>')


def _row(label: str, track: str, kind: str, extra: str = "") -> str:
    return (f'<div class="row {kind}"{extra}><div class="label">{label}</div>'
            f'<div class="track">{track}</div></div>')


def _axis(span: float) -> str:
    step = _tick_step(span)
    ticks = []
    at = 0.0
    while at <= span * 0.92:  # a label past that would run off the track's end
        shown = f"{at:.3g} s" if step < 1 else f"{at:g} s"
        ticks.append(f'<span class="tick" style="left:{at / span * 100:.4f}%">{shown}</span>')
        at = round(at + step, 9)
    return _row("", "".join(ticks), "axis")


def _tick_step(span: float) -> float:
    """A 1, 2 or 5 times a power of ten giving four to ten ticks over ``span``."""
    power = 10 ** math.floor(math.log10(span / 4))
    for factor in (1, 2, 5, 10):
        if span / (factor * power) <= 10:
            return float(factor * power)
    return float(10 * power)


def _table(run: _Run) -> str:
    head = ("<tr><th>Turn</th><th class=\"l\">Model</th><th class=\"l\">Stop</th><th>Input</th>"
            "<th>Output</th><th>Cache read</th><th>Cache write</th><th>Cost</th>"
            "<th>Saved by cache</th></tr>")
    rows, total = [], Usage()
    savings: List[Optional[float]] = []
    for request in run.requests:
        usage = _usage(request.usage)
        saving = _saving(request.provider, request.model, usage) if usage else None
        savings.append(saving)
        stop = _error(request.error) if request.error is not None else request.stop
        cls = ' class="l bad"' if request.error is not None else ' class="l"'
        rows.append(f"<tr><td>{request.turn}</td><td class=\"l\">{e(request.model)}</td>"
                    f"<td{cls}>{e(stop)}</td>{_counts(usage)}<td>{_saved(saving)}</td></tr>")
        if usage:
            total = total + usage
    final = _usage(run.finish.get("usage")) or total
    known = [s for s in savings if s is not None]
    saved = sum(known) if known and len(known) == len(savings) else None
    foot = (f"<tfoot><tr><td>Run</td><td></td><td class=\"l\">{e(_text(run.finish.get('stop')))}"
            f"</td>{_counts(final)}<td>{_saved(saved)}</td></tr></tfoot>")
    note = ('<p class="note">Input is billed at the full rate; cache reads and writes are '
            "counted apart. Cost is US dollars as recorded (blank where the backend knew no "
            "price). Saved by cache is what the same tokens would have cost with no cache, "
            "minus the cost, re-priced from nacelle's price table; &ndash; where that does not "
            "give back the recorded cost (a provider-reported cost, a custom price, one-hour "
            "cache writes). The run row is the run's own total, its sub-agents' spend "
            "included.</p>")
    return (f'<div class="scroll"><table><thead>{head}</thead><tbody>{"".join(rows)}</tbody>'
            f"{foot}</table></div>{note}{_compactions(run)}")


def _compactions(run: _Run) -> str:
    """A line per compaction of the run: the provider's context edits (what it cleared
    and the input tokens that saved) or the loop's (messages removed, tokens)."""
    lines = []
    for turn, strategy, removed, tokens in run.compactions:
        count = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0
        if strategy.startswith("context edits"):
            said = f"{e(strategy)}: {count:,} input tokens saved"
        else:
            gone = removed if isinstance(removed, int) and not isinstance(removed, bool) else 0
            said = f"compacted ({e(strategy)}): {gone:,} messages, ~{count:,} tokens"
        lines.append(f'<p class="note compaction">Turn {turn}: {said}</p>')
    return "".join(lines)


def _usage(raw: Any) -> Optional[Usage]:
    if not isinstance(raw, Mapping):
        return None
    counts = [raw.get(name, 0) for name in _COUNT_FIELDS]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        return None
    cost = _number(raw.get("cost")) or 0.0
    return Usage(input_tokens=counts[0], output_tokens=counts[1], cache_read_tokens=counts[2],
                 cache_creation_tokens=counts[3], cost=max(cost, 0.0),
                 priced=raw.get("priced") is True)


def _counts(usage: Optional[Usage]) -> str:
    if usage is None:
        return "<td></td>" * 5
    cost = f"${usage.cost:.4f}" if usage.priced or usage.cost else ""
    return (f"<td>{usage.input_tokens:,}</td><td>{usage.output_tokens:,}</td>"
            f"<td>{usage.cache_read_tokens:,}</td><td>{usage.cache_creation_tokens:,}</td>"
            f"<td>{cost}</td>")


def _saving(provider: str, model: str, usage: Usage) -> Optional[float]:
    price = price_for(provider, model)
    if price is None or not usage.priced:
        return None
    priced = price.priced(usage)
    if round(priced.cost, 12) != round(usage.cost, 12):
        return None
    return priced.cost_without_cache - priced.cost


def _saved(saving: Optional[float]) -> str:
    if saving is None:
        return "&ndash;"
    return f"-${-saving:.4f}" if saving < 0 else f"${saving:.4f}"


def _transcript(run: _Run) -> str:
    if run.messages is not None:
        return messages_html(run.messages)
    start = run.info.get("messages")
    messages = list(start) if isinstance(start, list) else []
    if run.streamed:
        messages.append({"role": "assistant", "parts": run.streamed})
    note = '<p class="note">The run has no final conversation (it did not finish): ' \
           "this is the conversation it started from, then what its stream showed.</p>"
    return note + messages_html(messages)
