"""The server wing: the agent over HTTP.

Owns: the ASGI app and its endpoints (``app``: ``create_app``), the HTTP plumbing
(``http``), the streams the endpoints serve (``streams``), the interop endpoints
(``interop``), messages to a running agent (``messages``), stopping a run (``stop``) and
the page (``web/``, package data).

Must not import: cli. It may use ``agent`` and every wing below it.
"""
