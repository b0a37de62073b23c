"""Two ingests of the same content at once: the first stores it, the second finds it stored ("unchanged").

In one Workbench the second waits for the first and skips embedding; two Workbenches (two REST workers) both
embed, and the store's check under the (site, source) lock reports the second as unchanged."""

from __future__ import annotations

import threading

import pytest


@pytest.mark.parametrize("workbenches", ["one", "two"])
def test_concurrent_ingests_of_identical_content_store_it_once(wb, site, workbenches) -> None:
    pair = [wb, wb if workbenches == "one" else wb.variant()]
    text = "\n\n".join(f"Paragraph {i}: the pump station {i} is inspected every {i % 12 + 1} months, and its "
                       f"valves are replaced when the pressure drops below {i % 7 + 2} bar." for i in range(150))
    barrier = threading.Barrier(2)
    outcomes = []

    def ingest(bench) -> None:
        barrier.wait()
        outcomes.append(bench.ingest_text("manuals/pumps.md", text, site_id=site))

    threads = [threading.Thread(target=ingest, args=(bench,)) for bench in pair]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.status for o in outcomes) == ["indexed", "unchanged"], outcomes
    stored = [d for d in wb.documents(site_id=site) if d["source"] == "manuals/pumps.md"]
    assert len(stored) == 1 and stored[0]["chunk_count"] == max(o.chunks for o in outcomes)
