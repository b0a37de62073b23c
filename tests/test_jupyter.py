"""The workbench inside Jupyter: `make lab` serves JupyterLab, and in a real kernel ingest shows a
notebook progress bar, results render as HTML, crawling works inside the kernel's running event loop
and the stop button leaves no half-written document."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest
from jupyter_client.manager import start_new_kernel

from crawl_server import Route, article_html, base_url, serve

ROOT = Path(__file__).resolve().parents[1]
ANSI_ESCAPE = "\x1b["


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_jupyterlab_on_loopback_with_the_project_kernel(tmp_path):
    port, token = free_port(), uuid.uuid4().hex
    env = {**os.environ, "JUPYTER_TOKEN": token, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    proc = subprocess.Popen(["make", "-C", str(ROOT), "lab", f"LAB_PORT={port}"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        status = None
        for _ in range(240):
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/api/status", params={"token": token}, timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                time.sleep(0.5)
        assert status is not None and status.status_code == 200, "JupyterLab did not answer"
        assert "started" in status.json()
        specs = httpx.get(f"http://127.0.0.1:{port}/api/kernelspecs", params={"token": token}, timeout=5).json()
        assert "python3" in specs["kernelspecs"]
        argv = specs["kernelspecs"]["python3"]["spec"]["argv"]
        assert Path(argv[0]).resolve().parent == Path(sys.executable).resolve().parent  # the project's venv
        contents = httpx.get(f"http://127.0.0.1:{port}/api/contents", params={"token": token}, timeout=5).json()
        assert any(item["name"].endswith(".ipynb") for item in contents["content"])    # served over notebooks/
        assert httpx.get(f"http://127.0.0.1:{port}/lab", params={"token": token}, timeout=5).status_code == 200
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


class Kernel:
    """A real IPython kernel (the one JupyterLab starts) driven over its messaging protocol."""

    def __init__(self, env: dict[str, str]) -> None:
        self.km, self.kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT / "notebooks"))
        self.stacks: Path | None = None   # where the kernel writes its threads' stacks on SIGUSR1

    def run(self, code: str, timeout: float = 300) -> list[dict[str, Any]]:
        """Execute a cell; returns its output messages (stream, display_data, execute_result, error).

        Right after an error or an interrupt the kernel aborts requests already sent, as Jupyter does
        with the cells queued behind a failed one: such a cell is sent again."""
        for _ in range(20):
            msg_id = self.kc.execute(code)
            outputs = self._outputs(msg_id, timeout)
            reply = self.kc.get_shell_msg(timeout=timeout)
            while reply["parent_header"].get("msg_id") != msg_id:
                reply = self.kc.get_shell_msg(timeout=timeout)
            if reply["content"]["status"] != "aborted":
                return outputs
            time.sleep(0.5)
        raise AssertionError("the kernel kept aborting the cell")

    def _outputs(self, msg_id: str, timeout: float) -> list[dict[str, Any]]:
        outputs = []
        deadline = time.time() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(1, deadline - time.time()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind in ("stream", "display_data", "execute_result", "error", "update_display_data"):
                outputs.append({"type": kind, **msg["content"]})
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                return outputs

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture
def kernel(pg_url, tmp_path):
    env = {**os.environ, "DATABASE_URL": pg_url, "RAG_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    k = Kernel(env)
    # SIGUSR1 makes the kernel write every thread's stack: what a test shows when the kernel goes silent
    k.stacks = tmp_path / "kernel-stacks.txt"
    setup = (f"import faulthandler, signal\n_stacks = open({str(k.stacks)!r}, 'w')\n"
             "faulthandler.register(signal.SIGUSR1, file=_stacks, all_threads=True)\n"
             "from rag_core import open_workbench\nwb = open_workbench()")
    assert not [o for o in k.run(setup) if o["type"] == "error"]
    yield k
    k.close()


def errors(outputs: list[dict[str, Any]]) -> list[str]:
    return [f"{o['ename']}: {o['evalue']}" for o in outputs if o["type"] == "error"]


def write_folder(folder: Path, count: int, words: int = 60) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        body = " ".join(f"topic{i} sentence{j} about heat pumps and solar panels." for j in range(words))
        (folder / f"note-{i:03d}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")
    return folder


def test_ingest_shows_a_notebook_progress_bar_and_search_renders_as_html(kernel, site, tmp_path):
    folder = write_folder(tmp_path / "docs", 6)
    out = kernel.run(f"report = wb.ingest_paths([{str(folder)!r}], site_id={site!r})\nreport.count('indexed')")
    assert not errors(out), errors(out)
    widgets = [o for o in out if o["type"] in ("display_data", "update_display_data")
               and "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets, out                                          # a widget bar, not a terminal bar
    streams = "".join(o.get("text", "") for o in out if o["type"] == "stream")
    assert ANSI_ESCAPE not in streams and "\r" not in streams   # no escape codes or carriage returns
    out = kernel.run(f"wb.search('heat pumps topic3', site_id={site!r})")
    [result] = [o for o in out if o["type"] == "execute_result"]
    assert "<mark" in result["data"]["text/html"] and "note-003.md" in result["data"]["text/html"]
    assert "text/markdown" in result["data"]
    out = kernel.run(f"wb.status({site!r})")
    [result] = [o for o in out if o["type"] == "execute_result"]
    assert "<table" in result["data"]["text/html"] and ">documents<" in result["data"]["text/html"]


def test_crawling_works_inside_the_kernels_running_event_loop(kernel, site):
    with serve() as srv:
        srv.state.routes.update({"/nb/index.html": Route(b"<html><body><a href='/nb/a.html'>a</a>"
                                                         b"<a href='/nb/b.html'>b</a></body></html>"),
                                 "/nb/a.html": Route(article_html("alpha")), "/nb/b.html": Route(article_html("beta"))})
        code = ("import asyncio\nassert asyncio.get_running_loop()  # cells run inside the kernel's loop\n"
                "from rag_core import open_workbench\n"
                "crawler = open_workbench(allowed_domains=['127.0.0.1'], allow_private_networks=True, "
                "crawl_delay_sec=0.05)\n"
                f"r = crawler.ingest_index({base_url(srv) + '/nb/index.html'!r}, pattern='/nb/', site_id={site!r})\n"
                "print(sorted(d['status'] for d in r.documents), r.errors)")
        out = kernel.run(code)
    assert not errors(out), errors(out)
    printed = "".join(o.get("text", "") for o in out if o["type"] == "stream")
    assert "['indexed', 'indexed'] []" in printed, printed


def interrupt_ingest(kernel: Kernel, wb: Any, folder: Path, site: str) -> str:
    """Start an ingest in the kernel, press stop once its first documents are committed; the cell's
    outcome: the error's name, or "finished" when the ingest completed before the stop took effect."""
    msg_id = kernel.kc.execute(f"wb.ingest_paths([{str(folder)!r}], site_id={site!r})")
    deadline = time.time() + 300
    while time.time() < deadline:   # interrupt once the first documents are committed
        with wb.db.connection() as conn:
            if conn.execute("SELECT count(*) FROM documents WHERE site_id = %s", (site,)).fetchone()[0]:
                break
        time.sleep(0.05)
    kernel.km.interrupt_kernel()
    presses, silent_since = 1, time.time()
    while True:
        try:
            msg = kernel.kc.get_iopub_msg(timeout=5)
        except queue.Empty:
            assert kernel.km.is_alive(), "the kernel died when it was interrupted"
            if time.time() - silent_since < 60:
                continue
            # A minute without a word: press stop again, as a user would, and keep what the kernel was doing
            # for the failure message.
            kernel.km.signal_kernel(signal.SIGUSR1)
            time.sleep(1)
            assert presses < 3, "the kernel ignored the stop button:\n" + kernel.stacks.read_text()[-6000:]
            warnings.warn("the kernel needed a second stop press; its stacks:\n" + kernel.stacks.read_text()[-6000:])
            kernel.km.interrupt_kernel()
            presses, silent_since = presses + 1, time.time()
            continue
        silent_since = time.time()
        if msg["parent_header"].get("msg_id") == msg_id:
            if msg["msg_type"] == "error":
                return msg["content"]["ename"]
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "finished"


def test_the_stop_button_leaves_no_half_written_document(kernel, site, tmp_path, wb):
    folder = write_folder(tmp_path / "many", 160)
    # On a busy machine the last batches can be written before the stop lands: then try again on a fresh
    # site (the test is about what an interrupted ingest leaves, so it needs one that was interrupted).
    try:
        for attempt in range(3):
            outcome = interrupt_ingest(kernel, wb, folder, f"{site}-{attempt}")
            if outcome != "finished":
                break
        assert outcome == "KeyboardInterrupt", f"three ingests ended before the stop took effect ({outcome})"
        stored_after_stop(kernel, wb, folder, f"{site}-{attempt}")
    finally:
        with wb.db.connection() as conn:
            conn.execute("DELETE FROM documents WHERE site_id LIKE %s", (f"{site}-_",))


def stored_after_stop(kernel: Kernel, wb: Any, folder: Path, site: str) -> None:
    """Every stored document of an interrupted ingest is whole, and ingesting again keeps them and adds the rest."""
    with wb.db.connection() as conn:
        rows = conn.execute(
            """SELECT d.source, d.chunk_count, count(c.id), count(c.embedding) FROM documents d
               LEFT JOIN chunks c ON c.document_id = d.id WHERE d.site_id = %s GROUP BY d.id""", (site,)).fetchall()
    assert 0 < len(rows) < 160
    assert all(stored == expected == embedded for _, expected, stored, embedded in rows), rows
    out = kernel.run(f"r = wb.ingest_paths([{str(folder)!r}], site_id={site!r})\n"
                     "r.count('unchanged'), len(r.outcomes), len(r.failures)")
    assert not errors(out), errors(out)
    [result] = [o for o in out if o["type"] == "execute_result"]
    assert result["data"]["text/plain"] == f"({len(rows)}, 160, 0)"   # what was stored is kept, the rest added
