"""Cutoff and its watchdog thread against real sockets: a blocked recv is woken at
its deadline or on cut(), a disarmed cutoff never acts, and an earlier deadline armed
after a later one is still kept. And content_length, as plain values: ASCII digits
or a list of the same ones, nothing else."""

import socket
import threading
import time

import pytest

from nacelle import read_limits
from nacelle.read_limits import MAX_LENGTH_DIGITS, Cutoff, content_length


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def blocked_recv(sock, results):
    """Start a thread blocked in sock.recv; what it returned (or raised) goes to results."""
    def run():
        try:
            results.append(sock.recv(10))
        except OSError as exc:
            results.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_a_cutoff_wakes_a_blocked_recv_at_its_deadline_and_names_its_cause(pair):
    reader, _ = pair
    reader.settimeout(30)
    cutoff = Cutoff(lambda: reader)
    results = []
    started = time.monotonic()
    cutoff.arm(started + 0.3, "timeout")
    blocked_recv(reader, results).join(5)
    assert results == [b""] and 0.25 <= time.monotonic() - started < 2.0
    assert cutoff.disarm() == "timeout" and cutoff.cause == "timeout"


@pytest.mark.slow
def test_a_cutoff_disarmed_in_time_never_acts(pair):
    reader, writer = pair
    cutoff = Cutoff(lambda: reader)
    cutoff.arm(time.monotonic() + 0.2, "timeout")
    assert cutoff.disarm() is None
    time.sleep(0.4)
    writer.sendall(b"x")
    reader.settimeout(2)
    assert reader.recv(1) == b"x" and cutoff.cause is None


def test_cut_acts_at_once_and_keeps_the_first_cause(pair):
    reader, _ = pair
    reader.settimeout(30)
    cutoff = Cutoff(lambda: reader)
    results = []
    thread = blocked_recv(reader, results)
    time.sleep(0.1)
    started = time.monotonic()
    cutoff.cut("cancelled")
    thread.join(5)
    assert results == [b""] and time.monotonic() - started < 1.0
    cutoff.cut("timeout")
    assert cutoff.cause == "cancelled"


def test_enforce_shuts_a_socket_that_appeared_after_the_cut(pair):
    reader, _ = pair
    holder = {"sock": None}
    cutoff = Cutoff(lambda: holder["sock"])
    cutoff.cut("timeout")  # nothing to shut yet: the connection is still being made
    holder["sock"] = reader
    cutoff.enforce()
    reader.settimeout(2)
    assert reader.recv(1) == b""


@pytest.mark.slow
def test_an_earlier_deadline_armed_after_a_later_one_is_kept(pair):
    reader, _ = pair
    reader.settimeout(30)
    later = Cutoff(lambda: None)
    later.arm(time.monotonic() + 60, "timeout")
    try:
        cutoff = Cutoff(lambda: reader)
        results = []
        started = time.monotonic()
        cutoff.arm(started + 0.3, "timeout")
        blocked_recv(reader, results).join(5)
        assert results == [b""] and time.monotonic() - started < 2.0
    finally:
        later.disarm()


@pytest.mark.slow
def test_rearming_moves_the_limit_and_disarmed_cutoffs_are_not_kept(pair):
    reader, _ = pair
    cutoff = Cutoff(lambda: reader)
    for _ in range(1000):
        cutoff.arm(time.monotonic() + 0.2, "timeout")
        cutoff.disarm()
    cutoff.arm(time.monotonic() + 60, "timeout")
    cutoff.arm(time.monotonic() + 0.2, "stall")
    reader.settimeout(5)
    assert reader.recv(1) == b"" and cutoff.disarm() == "stall"
    assert cutoff not in read_limits._ARMED


def test_a_socket_already_closed_when_the_cutoff_acts_is_left_alone(pair):
    reader, _ = pair
    reader.close()
    cutoff = Cutoff(lambda: reader)
    cutoff.arm(time.monotonic() + 0.05, "timeout")
    deadline = time.monotonic() + 5
    while cutoff.cause is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cutoff.disarm() == "timeout"


@pytest.mark.parametrize("value, length", [
    (None, None), ("0", 0), ("12", 12), ("012", 12), (" 12 ", 12), ("\t12", 12),
    ("12, 12", 12), ("12,12,12", 12), ("9" * MAX_LENGTH_DIGITS, int("9" * MAX_LENGTH_DIGITS)),
])
def test_content_length_reads_ascii_digits_and_lists_of_one_length(value, length):
    assert content_length(value) == length


@pytest.mark.parametrize("value", [
    "", " ", "+12", "-12", "1_000", "1 000", "12.0", "0x12", "1e3", "١٢٣", "１２", "²",
    "\u0661\u0662", "12;", "12,", ",12", "12, 13", "12\n", "9" * (MAX_LENGTH_DIGITS + 1),
])
def test_content_length_refuses_anything_int_would_stretch_to_a_number(value):
    with pytest.raises(ValueError, match="Content-Length"):
        content_length(value)


def test_content_length_says_why_a_long_number_is_refused():
    with pytest.raises(ValueError, match=f"more than {MAX_LENGTH_DIGITS} digits"):
        content_length("1" * 30)
