"""Provider seams: embedders, LLMs and rerankers, each a registry keyed by name."""
