"""Two ingests of the same content at once: the first stores it, the second finds it stored ("unchanged")."""

from __future__ import annotations

import threading


def test_concurrent_ingests_of_identical_content_store_it_once(wb, site) -> None:
    text = "\n\n".join(f"Paragraph {i}: the pump station {i} is inspected every {i % 12 + 1} months, and its "
                       f"valves are replaced when the pressure drops below {i % 7 + 2} bar." for i in range(150))
    barrier = threading.Barrier(2)
    outcomes = []

    def ingest() -> None:
        barrier.wait()
        outcomes.append(wb.ingest_text("manuals/pumps.md", text, site_id=site))

    threads = [threading.Thread(target=ingest) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.status for o in outcomes) == ["indexed", "unchanged"], outcomes
    assert len({o.document_id for o in outcomes}) == 1
    stored = [d for d in wb.documents(site_id=site) if d["source"] == "manuals/pumps.md"]
    assert len(stored) == 1 and stored[0]["chunk_count"] == max(o.chunks for o in outcomes)
