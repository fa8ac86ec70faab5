"""Sessions: conversations and agent runs judged as a whole (docs/sessions.md).

``paths`` (key and end paths), ``turns`` (what a graded event adds to its sessions), ``thread`` (the
thread the judges read, its rule metrics), ``state`` + ``scripts`` (the Redis state and its Lua),
``closer`` (closing exactly once across workers), ``local`` (the offline twin). Nothing is imported here:
each module sits on its own floor (docs/architecture.md, "Layers").
"""
