"""The Textual front: the app, its runbook controller, its key table, the first frame and the
hang-up watchdog (screens and panels live in ``seat_console.widgets``)."""
