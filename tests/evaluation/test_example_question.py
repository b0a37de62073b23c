"""Notebook 00's demonstration question on a folder of the user's own files."""

from __future__ import annotations


def test_the_example_question_is_kept_when_the_folder_answers_it(wb, site) -> None:
    from rag_core.bench import experiments

    wb.ingest_texts([{"source": "guide/db.md", "title": "Database guide",
                      "text": "Set DATABASE_URL to connect to your own PostgreSQL server with pgvector."}], site_id=site)
    question = "How do I connect to my own PostgreSQL server?"
    assert experiments.example_question(wb, site, question) == question


def test_a_folder_about_something_else_gets_a_question_its_files_answer(wb, site) -> None:
    """Notebook 00 pointed at a folder of unrelated files searched the project's example question, found
    nothing, and stopped on an IndexError when it marked the best hit; the question must find a file."""
    from rag_core.bench import experiments

    wb.ingest_texts([{"source": "garden/tomatoes.md", "title": "Tomato growing",
                      "text": "Tomatoes need six hours of sun. Water them at the roots in the morning."},
                     {"source": "garden/pests.md", "title": "Aphids on roses",
                      "text": "Ladybirds eat aphids; soapy water helps too."}], site_id=site)
    question = experiments.example_question(wb, site, "How do I connect to my own PostgreSQL server?")
    hits = wb.search(question, site_id=site, limit=1)["results"]
    assert hits and hits[0]["title"] in {"Tomato growing", "Aphids on roses"}
