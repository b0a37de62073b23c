"""Chat: sessions and messages, one turn with sources, context for external workflows, instructions, retention.

Kept import-free on purpose: `rag_core.providers.llms` imports `rag_core.chat.prompts`, and the turn
pipeline imports the providers; the Workbench imports the modules it needs lazily.
"""
