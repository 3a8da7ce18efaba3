"""_http_session.post: what ``session.post`` would send, without its merging."""

import requests

from nacelle.backends._http_session import new_session, post
from nacelle.testing.server import FakeServer, Reply


def _sent(server, send):
    server.queue("/v1/x", Reply.json({"ok": 1}))
    response = send()
    assert response.json() == {"ok": 1}
    response.close()
    return server.requests[-1]


def test_a_post_sends_what_session_post_sends():
    with FakeServer() as server:
        session = new_session(server.url)
        headers = {"x-api-key": "k", "content-type": "application/json",
                   "user-agent": "nacelle-test"}
        url = server.url + "/v1/x"
        ours = _sent(server, lambda: post(session, url, b'{"a": 1}', headers, (5.0, 5.0)))
        theirs = _sent(server, lambda: session.post(url, data=b'{"a": 1}', headers=headers,
                                                     stream=True, timeout=(5.0, 5.0),
                                                     allow_redirects=False))
    assert (ours.method, ours.path, ours.body) == (theirs.method, theirs.path, theirs.body)
    assert ours.headers == theirs.headers
    assert ours.headers["user-agent"] == "nacelle-test"  # the request's over the session's
    assert ours.headers["accept-encoding"] == requests.utils.default_headers()["Accept-Encoding"]


def test_a_header_set_to_none_is_not_sent():
    with FakeServer() as server:
        session = new_session(server.url)
        sent = _sent(server, lambda: post(session, server.url + "/v1/x", b"{}",
                                          {"Accept": None}, (5.0, 5.0)))
    assert "accept" not in sent.headers and sent.headers["user-agent"].startswith("python-")


def test_a_cookie_a_response_sets_is_sent_with_the_next_request():
    # As a session keeps them (and the official SDKs' clients do): a load balancer's
    # sticky cookie must reach the next request.
    with FakeServer() as server:
        session = new_session(server.url)
        server.queue("/v1/x", Reply.json({"ok": 1}, headers={"Set-Cookie": "lb=a1; Path=/"}))
        post(session, server.url + "/v1/x", b"{}", {}, (5.0, 5.0)).close()
        sent = _sent(server, lambda: post(session, server.url + "/v1/x", b"{}", {}, (5.0, 5.0)))
    assert sent.headers["cookie"] == "lb=a1"


def test_a_redirect_is_not_followed():
    with FakeServer() as server:
        session = new_session(server.url)
        server.queue("/v1/x", Reply(status=307, headers={"Location": "/v1/y"}, chunks=(b"",),
                                    mode="length"))
        response = post(session, server.url + "/v1/x", b"{}", {}, (5.0, 5.0))
        assert response.status_code == 307
        response.close()
        assert [r.path for r in server.requests] == ["/v1/x"]
