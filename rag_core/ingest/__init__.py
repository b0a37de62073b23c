"""Ingestion: loaders, chunking, the pipeline and the web crawler."""
