"""`rag slack` under attack, on loopback: oversized, slow and malformed unsigned requests, replays, and slash
commands while questions queue and the Slack API is in trouble. Memory and log size are bounded generously
here; eval/bench_hardening.py prints the measured figures."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from slack_harness import DOCS, rag_slack, rag_slack_process, slack_api, slack_env  # noqa: F401 - fixture
from slack_web import SECRET, SlackApiServer, command_body, mention, post_command, post_event, sign
from rag_core.limits import MAX_SLACK_BODY_BYTES

MB = 1_000_000


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1000
    raise AssertionError("no VmHWM in /proc status")


def raw_post(base: str, sent: bytes, declared: int) -> bytes:
    """POST `sent` to /slack/events declaring a Content-Length of `declared`; the start of the answer."""
    with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as sock:
        sock.settimeout(60)
        sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % declared)
        try:
            sock.sendall(sent)
        except OSError:
            pass  # refused and closed before all of it was sent
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < 20:
            part = sock.recv(4096)
            if not part:
                break
            answer += part
        return answer


def stream_unsigned(base: str, size: int, chunk: int = 1 << 20) -> int:
    """POST `size` bytes of JSON-looking text without a signature or a Content-Length (chunked); the status,
    or 0 when the bot closed the connection before answering."""
    def body():
        yield b'{"type": "event_callback", "pad": "'
        sent = 0
        while sent < size:
            yield b"x" * chunk
            sent += chunk
        yield b'"}'

    try:
        return httpx.post(f"{base}/slack/events", content=body(), headers={"Content-Type": "application/json"},
                          timeout=60).status_code
    except httpx.HTTPError:
        return 0


def test_oversized_and_slow_unsigned_bodies_are_refused_before_they_are_read(slack_api, pg_url, tmp_path) -> None:
    log = tmp_path / "slack.log"
    with rag_slack_process(slack_env(slack_api, pg_url, tmp_path, "default"), tmp_path, log) as (bot, proc):
        before = peak_rss_mb(proc.pid)
        # A declared 400 MB body is refused by its length: nothing is waited for.
        declared = raw_post(bot, b"{" + b" " * 65536, 400 * MB)
        assert declared.startswith(b"HTTP/1.1 413"), declared
        # Bodies with no length are cut off as they stream past the cap: 40 at once, 20 MB each.
        statuses: list[int] = []
        threads = [threading.Thread(target=lambda: statuses.append(stream_unsigned(bot, 20 * MB))) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(s in (413, 0) for s in statuses), statuses
        assert statuses.count(413) >= 1
        # A body that never finishes is not waited for forever.
        assert raw_post(bot, b"{", 1000).startswith(b"HTTP/1.1 408")
        rise = peak_rss_mb(proc.pid) - before
        assert httpx.get(f"{bot}/health").status_code == 200
    assert rise < 150, f"peak memory rose {rise:.0f} MB"
    output = log.read_text()
    assert len(output) < MB, f"the log grew to {len(output)} bytes"
    assert "xxxxxxxxxxxxxxxx" not in output
    assert f"over {MAX_SLACK_BODY_BYTES} bytes".encode() in declared


def test_malformed_requests_get_a_4xx_and_the_connection_stays_usable(slack_api, pg_url, tmp_path) -> None:
    log = tmp_path / "slack.log"
    not_json = "payload={not"
    cases = [
        ("non-numeric timestamp", b'{"type": "url_verification"}',
         {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=00"}),
        ("unsigned {", b"{", {}),
        ("signed, not UTF-8", b'{"text": "\xff\xfe"}', {}),
        ("signed, a payload that is not JSON", not_json.encode(), {}),
        ("signed, JSON that is not an object", b"[1, 2]", {}),
    ]
    with rag_slack(slack_env(slack_api, pg_url, tmp_path, "default"), tmp_path, log) as bot:
        with httpx.Client(timeout=30) as client:
            for name, body, headers in cases:
                if not headers and not name.startswith("unsigned"):
                    headers = _sign_bytes(body)
                ctype = "application/x-www-form-urlencoded" if body.startswith(b"payload") else "application/json"
                response = client.post(f"{bot}/slack/events", content=body,
                                       headers={"Content-Type": ctype, **headers})
                assert 400 <= response.status_code < 500, (name, response.status_code, response.text)
                assert "Traceback" not in response.text
                # The same keep-alive connection serves the next request.
                assert client.get(f"{bot}/health").status_code == 200, name
    output = log.read_text()
    assert "Traceback" not in output and "payload={not" not in output


def _sign_bytes(body: bytes) -> dict[str, str]:
    import hashlib
    import hmac

    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


def test_a_replayed_slash_command_runs_once(slack_api, wb, site, pg_url, tmp_path) -> None:
    log = tmp_path / "slack.log"
    with rag_slack(slack_env(slack_api, pg_url, tmp_path, site), tmp_path, log) as bot:
        body = command_body("status", slack_api.response_url("replay"))
        headers = {"Content-Type": "application/x-www-form-urlencoded", **sign(body)}
        first = httpx.post(f"{bot}/slack/events", content=body, headers=headers, timeout=30)
        again = httpx.post(f"{bot}/slack/events", content=body, headers=headers, timeout=30)
        assert first.status_code == again.status_code == 200
        slack_api.wait_for(lambda c: c.method == "response_url")
        other = post_command(bot, "status", slack_api.response_url("other"))  # a new command still runs
        assert other.status_code == 200
        slack_api.wait_for(lambda c: c.method == "response_url", count=2)
        time.sleep(1.0)  # room for a second, replayed answer to arrive
    answers = [c for c in slack_api.of("response_url")]
    assert len(answers) == 2, [c.text for c in answers]


@pytest.mark.parametrize("outage", SlackApiServer.OUTAGES)
def test_slash_commands_are_acknowledged_while_questions_queue_and_slack_is_in_trouble(
        slack_api, wb, site, pg_url, tmp_path, outage) -> None:
    assert wb.ingest_texts(DOCS, site_id=site).to_dict()["failed"] == 0
    log = tmp_path / "slack.log"
    with rag_slack(slack_env(slack_api, pg_url, tmp_path, site), tmp_path, log) as bot:
        slack_api.outage = outage
        with httpx.Client(timeout=30) as client:
            for i in range(100):
                body = json.dumps(mention(f"What does the await keyword do? ({i})"))
                assert client.post(f"{bot}/slack/events", content=body,
                                   headers={"Content-Type": "application/json", **sign(body)}).status_code == 200
        # bolt answers 404 "unhandled request" when the listener did not acknowledge within Slack's 3 seconds.
        status = post_command(bot, "status", slack_api.response_url("status"), timeout=30)
        assert status.status_code == 200, status.text
        slack_api.wait_for(lambda c: c.method == f"outage:{outage}")  # the questions did meet the outage
        slack_api.reset()  # release hung calls so the bot can stop
