"""Evaluation: BEIR datasets, retrieval metrics, the runner and benchmarks helpers."""
