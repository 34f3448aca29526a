"""Sources: the modules that read the node (NVML through :mod:`seat_console.node.nvml`, timers,
Alertmanager silences, the docker engine, the engine's ``/metrics`` and logs, checkpoint files).
Read only: a source never writes and never raises into the UI.

Every source returns either a frozen pydantic model of what it read, or an
:class:`~seat_console.core.base.Unavailable` carrying why it could not read; a source never
reports an unknown as 0. The shared shapes live in :mod:`seat_console.core.base`.
"""
