"""`python -m rag_core.cli`: the same `rag` command, for environments without the console script."""

from rag_core.cli import main

main()
