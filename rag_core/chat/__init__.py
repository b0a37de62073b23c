"""Chat: sessions and messages, one turn with sources, context for external workflows, instructions, retention.

`service.ChatService` answers turns and `service.SessionService` keeps conversations; both are built from
an `ingest.handle.Store`.
"""
