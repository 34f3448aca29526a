"""``seat-console serve``: the console's screens, read-only, to a browser on loopback.

A front (``../shared/DESIGN.md``): it composes and holds no business rules.

* :mod:`seat_console.serve.plan` — pure: the loopback check, the served command's argument
  list (always ``--readonly``), the limits, the plan printed by ``--json`` / ``--dry-run``;
* :mod:`seat_console.serve.server` — the web server: textual-serve's ``Server`` with an app
  process per browser tab started from an argument list (no shell), at most ``max_viewers``
  of them, and a page template of the project's that loads nothing from outside the node;
* :mod:`seat_console.serve.command` — the ``serve`` subcommand.

See ``docs/serve.md``.
"""
