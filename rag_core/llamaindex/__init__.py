"""LlamaIndex's own interfaces over the workbench: retriever, vector store, engines, chat store, interop.

Every class here reads and writes the workbench's tables (documents, chunks, chat_sessions,
chat_messages): nothing is copied into a second store.
"""
