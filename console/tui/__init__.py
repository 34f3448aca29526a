"""The Textual fronts: the console app, its runbook controller, its key table, the first frame
and the hang-up watchdog, and the fleet screen (screens and panels live in
``seat_console.widgets``)."""
