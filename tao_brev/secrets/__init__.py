"""Secrets: which names are credentials, the values this process knows, and every exit they are
checked at. One job per module, in dependency order (no module imports one listed after it):

- ``names``: credential names (``is_secret_name``), the bundle's credential variables
- ``forms``: the encodings a value is searched in, and the one pattern of all of them
- ``invisible``: the characters a text holds without showing them (by Unicode property)
- ``taint``: the decoders: a job's text read as a decoder would (its readings)
- ``withhold``: known values and their parts found in those readings, each line holding one withheld
- ``values``: the registry (:class:`values.Registry`, ``values.DEFAULT``): the known values
- ``search``: where known values occur in a text, and the text with them replaced
- ``parsed``: a parsed spec or override searched key by key, string by string
- ``guard``: refused outbound (SECRET_IN_COMMAND, SECRET_IN_IDENTIFIER, SECRET_TOO_SHORT)
- ``literal``, ``rules``, ``lint``: the pattern lint (advice) over specs, overrides, commands, logs
- ``redact``: redaction of text, URIs and JSON-like answers (patterns, then known values)
- ``safe_read``: every read bounded (regular files only, size caps)
- ``proof``: keyed digests of a job's ``--env`` values, verdicts of a later verb
- ``file_names``: file names holding a known value (refused, stored as digests)
- ``archive_names``: a kept results archive's member names holding a value, rewritten as digests
- ``interpolation``: what a spec string may become once OmegaConf evaluates it

Nothing is imported here: a caller imports the module it needs.
"""
