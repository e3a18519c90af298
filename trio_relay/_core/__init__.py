"""The sans-I/O core: plain Python that imports no Trio, no socket library and no HTTP
client. Bytes and values in, decisions and events out; the Trio shell in ``_trio/``
carries them out. ``tests/core/test_import_rule.py`` walks this folder and fails on any
I/O import."""
