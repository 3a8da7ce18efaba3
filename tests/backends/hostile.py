"""Shared by the backend tests: the hostile JSON values that have broken clients, the
ways to swap them into a stream's fields, and the chain of exceptions behind an error
(which a secret must reach no link of). Not a test module: imported by them."""

import json

from hypothesis import strategies as st

# Nulls, bools that pass for ints, NaN, huge and negative numbers, text where objects
# belong and the other way round.
SPECIAL = [None, True, False, 0, -5, 1.5, float("nan"), float("inf"), float("-inf"),
           10**400, 2**53 + 1, "", "None", "0", [], {}, [0], {"type": None}, "error"]


def wrong_values(*words):
    """A strategy for a value of the wrong type or size; ``words`` are the dialect's own
    vocabulary (stop reasons, block types), the strings most likely to confuse it."""
    special = SPECIAL + list(words)
    return st.one_of(
        st.sampled_from(special), st.sampled_from(special), st.sampled_from(special),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
        st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.none(),
                                                             max_size=2),
    )


def locations(value, path=()):
    """Every place inside a JSON value: the paths of its containers and leaves."""
    yield path
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, child in items:
        yield from locations(child, path + (key,))


def leaves(value):
    """The paths of the scalars inside a JSON value (where most fields live)."""
    for path in locations(value):
        if not isinstance(_at(value, path), (dict, list)):
            yield path
    yield ()


def _at(value, path):
    for key in path:
        value = value[key]
    return value


def swapped(data, path, value):
    """A copy of ``data`` with ``value`` at ``path`` (``value`` itself for the root)."""
    if not path:
        return value
    copy = json.loads(json.dumps(data))
    holder = copy
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return copy


def chain(error):
    """``error`` and every exception behind it, through __cause__ and __context__."""
    seen, todo = [], [error]
    while todo:
        current = todo.pop()
        if current is None or any(current is e for e in seen):
            continue
        seen.append(current)
        todo += [current.__cause__, current.__context__]
    return seen


# An emoji cut between its two UTF-16 halves, as a server that splits deltas by code
# unit sends it: each half alone is a lone surrogate, which no UTF-8 encoder takes.
EMOJI, HIGH, LOW = "\U0001f600", "\ud83d", "\ude00"


def assert_well_formed(*values):
    """Every string inside ``values`` (events, TurnEnds, parts, messages, containers)
    encodes as UTF-8: no lone surrogate reached them."""
    todo = list(values)
    while todo:
        value = todo.pop()
        if isinstance(value, str):
            value.encode("utf-8")
        elif isinstance(value, dict):
            todo += list(value.keys()) + list(value.values())
        elif isinstance(value, (list, tuple)):
            todo += list(value)
        elif hasattr(value, "__dataclass_fields__"):
            todo += [getattr(value, name) for name in value.__dataclass_fields__]
