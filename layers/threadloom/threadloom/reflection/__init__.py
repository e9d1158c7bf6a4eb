"""Reflection: memory extracted from a conversation off the request path (issue 26).

A reflection is a job on the compaction queue (``CompactionRequest`` of kind ``reflection``). It reads the messages
of a session since its last reflection, asks an extractor for facts the user stated about themselves
(``offline``: fixed patterns, ``bedrock``: a Converse model) and turns them into edits of a memory block
(``facts.plan_edits``), which apply at once or wait for approval. Edits reach the block through the
``protocols.MemoryBlocks`` protocol, with provenance (source message ids, the reflection job as actor).
See docs/reflection.md.
"""
