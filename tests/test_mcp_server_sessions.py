"""The sessions of the 2025 handshake on HTTP (nacelle.mcp.server.sessions): ids,
principals, cancellation of what runs in one, and the bounds on how many are kept."""

import threading

from nacelle.mcp.server.sessions import Sessions


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_session_is_found_by_its_id_and_only_by_its_own_principal():
    sessions = Sessions()
    opened = sessions.open("2025-11-25", "alice")
    assert opened is not None and len(opened.id) >= 40 and opened.id.isascii()
    assert sessions.find(opened.id, "alice") is opened
    assert sessions.find(opened.id, "bob") is None
    assert sessions.find("made-up", "alice") is None


def test_ending_a_session_cancels_what_runs_in_it_and_forgets_it():
    sessions = Sessions()
    opened = sessions.open("2025-11-25", "")
    cancel = threading.Event()
    sessions.start(opened, 7, cancel)
    assert not sessions.close(opened.id, "someone else")
    assert sessions.close(opened.id, "")
    assert cancel.is_set()
    assert sessions.find(opened.id, "") is None
    assert not sessions.close(opened.id, "")


def test_a_cancel_reaches_only_the_request_it_names_and_ids_keep_their_type():
    sessions = Sessions()
    opened = sessions.open("2025-11-25", "")
    one, text_one = threading.Event(), threading.Event()
    sessions.start(opened, 1, one)
    sessions.start(opened, "1", text_one)
    sessions.cancel(opened, "1")
    assert text_one.is_set() and not one.is_set()
    sessions.finish(opened, 1)
    sessions.cancel(opened, 1)
    assert not one.is_set()


def test_an_idle_session_is_forgotten_unless_a_request_still_runs_in_it():
    clock = Clock()
    sessions = Sessions(idle=60, clock=clock)
    idle = sessions.open("2025-11-25", "")
    busy = sessions.open("2025-11-25", "")
    sessions.start(busy, 1, threading.Event())
    clock.now = 61
    assert sessions.find(idle.id, "") is None
    assert sessions.find(busy.id, "") is busy


def test_past_the_limit_the_least_recently_used_idle_session_makes_room():
    sessions = Sessions(limit=2)
    first = sessions.open("2025-11-25", "")
    second = sessions.open("2025-11-25", "")
    sessions.find(first.id, "")  # the first is now the more recently used
    third = sessions.open("2025-11-25", "")
    assert third is not None
    assert sessions.find(second.id, "") is None
    assert sessions.find(first.id, "") is first


def test_when_every_session_is_busy_a_new_one_is_refused():
    sessions = Sessions(limit=1)
    busy = sessions.open("2025-11-25", "")
    sessions.start(busy, 1, threading.Event())
    assert sessions.open("2025-11-25", "") is None
