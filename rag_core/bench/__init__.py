"""Harnesses that open whole workbenches to measure them: retrieval suites per embedder, chunking and fusion
sweeps, peers (bm25s, ChromaDB, LlamaIndex) on the same data, answer quality with ragas, your own experiments.

They sit above the Workbench like the CLI does; the measuring itself (datasets, metrics, the runner, judged
queries) is `rag_core.evaluation`, which the services use.
"""
