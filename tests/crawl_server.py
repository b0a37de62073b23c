"""A real HTTP test server on 127.0.0.1 (stdlib ThreadingHTTPServer, random port) for crawler tests.

Fixed routes cover articles with nav/header/footer boilerplate, redirects, robots.txt, slow,
oversized, binary, PDF, plain-text and conditional (ETag) pages; ``state.routes`` adds or
overrides pages per test (content that changes between crawls, delays, validators).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROBOTS = "User-agent: *\nDisallow: /private/\n"


@dataclass
class Route:
    """A page served at an exact path; with ``etag``, a matching If-None-Match gets 304."""

    body: bytes = b""
    status: int = 200
    ctype: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    etag: str | None = None
    gate: threading.Event | None = None  # the answer waits until the test sets it


def article_html(n: str) -> bytes:
    paragraphs = "".join(
        f"<p>ARTICLETOKEN{n} paragraph {i}: the retrieval augmented generation workbench splits "
        "documents into chunks, embeds them and stores the vectors so that questions can be "
        "answered from the most similar passages with their sources.</p>"
        for i in range(4)
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>Article {n}</title><script>var SCRIPTTOKEN = 'tracking';</script>"
        "<style>.STYLETOKEN { color: red; }</style></head><body>"
        "<header><div class='logo'>HEADERTOKEN Example Site</div></header>"
        "<nav><ul><li><a href='/'>NAVTOKEN Home</a></li><li><a href='/about'>NAVTOKEN About</a></li>"
        "<li><a href='/contact'>NAVTOKEN Contact</a></li></ul></nav>"
        f"<main><article><h1>Article {n} heading</h1>{paragraphs}</article></main>"
        "<footer><p>FOOTERTOKEN Copyright 2024 Example Corp. All rights reserved.</p>"
        "<a href='/privacy'>FOOTERTOKEN Privacy</a></footer>"
        "<script>console.log('SCRIPTTOKEN2');</script></body></html>"
    ).encode()


def make_pdf(text: str) -> bytes:
    """A minimal one-page PDF (Helvetica text), written by hand with a correct xref table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


class ServerState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.records: list[dict[str, Any]] = []
            self.inflight = 0
            self.max_inflight = 0
            self.robots_status = 200
            self.robots_body = ROBOTS
            self.routes: dict[str, Route] = {}

    def paths(self) -> list[str]:
        with self.lock:
            return [r["path"] for r in self.records]


class Handler(BaseHTTPRequestHandler):
    server_version = "CrawlTestServer/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        pass

    @property
    def state(self) -> ServerState:
        return self.server.state  # type: ignore[attr-defined]

    def send(self, status: int, body: bytes = b"", ctype: str = "text/html; charset=utf-8",
             headers: dict[str, str] | None = None, length: bool = True) -> None:
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def serve_route(self, route: Route) -> None:
        if route.gate is not None:
            route.gate.wait(60)
        if route.delay:
            time.sleep(route.delay)
        headers = dict(route.headers)
        if route.etag:
            headers["ETag"] = route.etag
            if self.headers.get("If-None-Match") == route.etag:
                self.send(304, b"", ctype="", headers=headers, length=False)
                return
        self.send(route.status, route.body, ctype=route.ctype, headers=headers)

    def redirect(self, location: str, status: int = 302) -> None:
        self.send(status, b"", ctype="", headers={"Location": location})

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        started = time.monotonic()
        state = self.state
        record = {"path": self.path, "start": started, "host": self.headers.get("Host"),
                  "ua": self.headers.get("User-Agent"), "inm": self.headers.get("If-None-Match"),
                  "ims": self.headers.get("If-Modified-Since")}
        tracked = self.path.startswith("/conc/")  # in-flight count only for the concurrency test
        with state.lock:
            state.records.append(record)
            if tracked:
                state.inflight += 1
                state.max_inflight = max(state.max_inflight, state.inflight)
        try:
            self.route()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)
        finally:
            if tracked:
                with state.lock:
                    state.inflight -= 1

    def route(self) -> None:
        path = self.path
        port = self.server.server_address[1]
        state = self.state
        with state.lock:
            custom = state.routes.get(path)
        if custom is not None:
            self.serve_route(custom)
        elif path == "/robots.txt":
            self.send(state.robots_status, state.robots_body.encode(), ctype="text/plain")
        elif path == "/index.html":
            self.send(200, index_html(port))
        elif path == "/plain-index.txt":
            self.send(200, b"/articles/a1.html", ctype="text/plain")
        elif path.startswith(("/articles/", "/other/", "/private/")):
            name = path.rsplit("/", 1)[-1].split(".")[0]
            self.send(200, article_html(name))
        elif path == "/redirect/forbidden":
            self.redirect("http://evil.test/x")
        elif path == "/redirect/ok":
            self.redirect("/articles/a1.html", 301)
        elif path.startswith("/redirect/chain/"):
            n = int(path.rsplit("/", 1)[-1])
            self.redirect(f"/redirect/chain/{n - 1}" if n > 0 else "/articles/a2.html")
        elif path == "/redirect/rebind":
            self.redirect(f"http://inner.test:{port}/articles/a1.html")
        elif path == "/redirect/robots":
            self.redirect("/private/hidden.html")
        elif path == "/slow.html":
            time.sleep(1.5)
            self.send(200, article_html("slow"))
        elif path.startswith("/conc/"):
            time.sleep(0.15)
            self.send(200, article_html("c" + path.rsplit("/", 1)[-1]))
        elif path == "/big.html":
            self.send(200, b"<html><body><p>" + b"x" * 200_000 + b"</p></body></html>")
        elif path == "/big-stream.html":  # no Content-Length: the body ends when the connection closes
            self.send(200, b"<html><body><p>" + b"y" * 200_000 + b"</p></body></html>", length=False)
        elif path == "/file.bin":
            self.send(200, bytes(range(256)) * 4, ctype="application/octet-stream")
        elif path == "/plain.txt":
            self.send(200, "Plain text page about crawling, ünïcode included.\n".encode(),
                      ctype="text/plain; charset=utf-8")
        elif path == "/doc.pdf":
            self.send(200, make_pdf("PDFTOKEN crawled portable document"), ctype="application/pdf")
        elif path == "/etag.html":
            validators = {"ETag": '"v1"', "Last-Modified": "Wed, 01 May 2024 10:00:00 GMT"}
            if self.headers.get("If-None-Match") == '"v1"':
                self.send(304, b"", ctype="", headers=validators, length=False)
            else:
                self.send(200, article_html("etag"), headers=validators)
        elif path == "/error500":
            self.send(500, b"boom", ctype="text/plain")
        else:
            self.send(404, b"<html><body>not here</body></html>")


def index_html(port: int) -> bytes:
    links = [
        "/articles/a1.html",
        "/articles/a2.html",
        "/articles/a1.html#comments",              # fragment of a known link
        "/articles/a1.html",                       # duplicate
        "articles/a3.html",                        # relative
        "/other/about.html",                       # does not match the pattern
        "http://evil.test/articles/steal.html",    # not allowlisted (matches the pattern)
        "javascript:void(0)",
        "mailto:someone@example.com",
        "#top",
        f"http://127.0.0.1:{port}/articles/a2.html",  # absolute duplicate
        "/private/secret.html",                     # disallowed by robots.txt
    ]
    anchors = "".join(f"<li><a href='{href}'>Link {i}</a></li>" for i, href in enumerate(links))
    return (f"<html><head><title>Index</title></head><body><nav><a href='/'>home</a></nav>"
            f"<ul>{anchors}</ul></body></html>").encode()


@contextmanager
def serve() -> Iterator[ThreadingHTTPServer]:
    """Start the server on a free port of 127.0.0.1; stopped on exit."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.block_on_close = False
    httpd.state = ServerState()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def base_url(server: Any) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"
