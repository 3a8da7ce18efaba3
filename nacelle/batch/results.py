"""The results file of a batch: one JSON line per finished run, appended, and read back
to resume.

``run_many(..., results=path)`` writes each finished item here the moment it
arrives, from the parent process only (one writer, so no locking across processes):
one line of ``{"index", "stop", "usage", "cost", "text", "output", "error"}``
(``output`` only for a run with structured output, as JSON-able data), then
``flush`` and ``fsync``, so a line that was reported is on disk even if the machine
goes down next.

Choices where the issue is silent:

- Every index already in the file is skipped on a rerun, failures included: a rerun
  resumes, it does not retry. To retry the failures, drop their lines (``error`` is
  not null) and run again.
- Only the last line can be torn (a process killed in the middle of a write leaves a
  line without its newline). It is cut off before anything is appended, so its run is
  done again and the file stays one JSON object per line. A complete line that is not
  a result (edited by hand, say) is logged and ignored, and its index is run again.
- ``output`` that ``json`` cannot write is turned into data the way its type offers
  (pydantic's ``model_dump(mode="json")``, a dataclass's fields) and, failing that,
  its ``repr``: the file must stay readable by anything that reads JSON lines.

Imports the standard library, ``bounded_json`` and ``events`` only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from typing import IO, Any, Dict, Optional, Set, Union

from .._loggers import get_logger
from .. import bounded_json
from ..events import Usage

__all__ = ["ResultsFile", "finished_indexes", "provider_round", "record"]

log = get_logger(__name__)


def record(index: int, result: Any, error: Any) -> Dict[str, Any]:
    """The JSON object one finished run becomes (``result`` a Result or None)."""
    line: Dict[str, Any] = {"index": index, "stop": None, "usage": None, "cost": 0.0,
                            "text": None, "error": None}
    if result is not None:
        usage: Usage = result.usage
        line.update(stop=result.stop.value, cost=usage.cost, text=result.text, usage={
            "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_creation_tokens": usage.cache_creation_tokens,
            "reasoning_tokens": usage.reasoning_tokens, "priced": usage.priced})
        if result.output is not None:
            line["output"] = _jsonable(result.output)
    if error is not None:
        line["error"] = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return line


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json")
        except Exception:  # noqa: BLE001 - fall through to the next form
            log.debug("model_dump failed for %r", type(value), exc_info=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            data = dataclasses.asdict(value)
            json.dumps(data)
            return data
        except (TypeError, ValueError):
            pass
    return repr(value)


def finished_indexes(path: "Union[str, os.PathLike[str]]") -> Set[int]:
    """The indexes the file at ``path`` already holds (none if it does not exist), after
    cutting off a torn last line."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return set()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        log.info("results file %s ends in a torn line (%d bytes): cutting it off, its run "
                 "is done again", path, len(data) - end)
        with open(path, "r+b") as handle:
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())
    done: Set[int] = set()
    for number, raw in enumerate(data[:end].splitlines(), 1):
        if not raw.strip():
            continue
        try:
            value = bounded_json.loads(raw, what="result", max_depth=bounded_json.DOCUMENT_DEPTH)
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("provider_batch"), dict):
            continue  # a provider batch's round (provider_round), not a result
        index = value.get("index") if isinstance(value, dict) else None
        if type(index) is not int or index < 0:
            log.warning("results file %s line %d is not a result; its run is done again",
                        path, number)
            continue
        done.add(index)
    return done


def provider_round(path: "Union[str, os.PathLike[str]]") -> Dict[int, Dict[str, Any]]:
    """The runs of the last provider-batch round the file holds that have no result
    line yet, by index: each ``{"index", "custom_id", "batch", "messages", "usage",
    "streamed"}`` (``batch/provider.py`` writes them; a rerun resumes from them)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return {}
    last: Dict[int, Dict[str, Any]] = {}
    done: Set[int] = set()
    for raw in data[:data.rfind(b"\n") + 1].splitlines():
        if b"provider_batch" not in raw:
            continue
        try:
            value = bounded_json.loads(raw, what="result", max_depth=bounded_json.DOCUMENT_DEPTH)
        except ValueError:
            continue
        round_ = value.get("provider_batch") if isinstance(value, dict) else None
        if not isinstance(round_, dict) or not isinstance(round_.get("items"), list):
            continue
        last = {}
        for item in round_["items"]:
            if (isinstance(item, dict) and type(item.get("index")) is int
                    and all(isinstance(item.get(k), str) for k in ("custom_id", "batch",
                                                                    "messages"))):
                last[item["index"]] = item
    done = finished_indexes(path)
    return {index: item for index, item in last.items() if index not in done}


class ResultsFile:
    """Appends one line per finished run, each flushed and fsynced."""

    def __init__(self, path: "Union[str, os.PathLike[str]]") -> None:
        self.path = path
        self._handle: Optional[IO[bytes]] = open(path, "ab")
        self._lock = threading.Lock()  # a provider batch writes its rounds from its thread

    def write(self, index: int, result: Any, error: Any) -> None:
        self.write_line(record(index, result, error))

    def write_line(self, value: Dict[str, Any]) -> None:
        """Append one JSON line, flushed and fsynced."""
        line = json.dumps(value, ensure_ascii=False)
        with self._lock:
            handle = self._handle
            if handle is None:
                raise ValueError("the results file is closed")
            # One write of the whole line: a kill can only tear the last line.
            handle.write(line.encode("utf-8") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()
