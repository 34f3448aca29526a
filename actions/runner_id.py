"""Which process runs a runbook, so any console can tell a run in progress from one whose
console died.

The runbook engine records :func:`runner_identity` in a run's facts before its ``start`` row
(``facts["runner"]``); :func:`runner_alive` answers, for a run with no ``end`` row, whether that
process still runs on this host: same host name and kernel boot (``/proc/sys/kernel/random/
boot_id``), the PID alive (``os.kill(pid, 0)``) and its command line naming the console
(``/proc/PID/cmdline`` holds ``seat_console`` or ``seat-console``, so a reused PID is not taken
for it). ``None`` when it cannot be told (another host, a run written before this was recorded).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RUNNER = "runner"
"""The facts key of a run's :func:`runner_identity`."""


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text("ascii").strip()[:64]
    except OSError:
        return ""


def runner_identity() -> dict[str, Any]:
    """``{"pid": int, "host": str, "boot_id": str}`` of this process."""
    return {"pid": os.getpid(), "host": socket.gethostname()[:255], "boot_id": _boot_id()}


def runner_alive(runner: Any) -> bool | None:
    """Whether the process ``runner`` (a run's ``facts["runner"]``) still runs: ``True`` /
    ``False`` on this host and boot, ``None`` when it cannot be told (not recorded, malformed,
    another host or an earlier boot counts as ``False`` only for the boot: a reboot ended it)."""
    if not isinstance(runner, Mapping):
        return None
    pid, host, boot = runner.get("pid"), runner.get("host"), runner.get("boot_id")
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid < 2**22 \
            or not isinstance(host, str):
        return None
    if host != socket.gethostname()[:255]:
        return None
    if isinstance(boot, str) and boot and boot != _boot_id():
        return False                  # the host rebooted since: that process is gone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                          # alive, another user's
    except OSError:
        return None
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return b"seat_console" in cmd or b"seat-console" in cmd


__all__ = ["RUNNER", "runner_alive", "runner_identity"]
