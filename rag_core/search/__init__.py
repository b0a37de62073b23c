"""Search: validation, hybrid retrieval, facets, highlights."""
