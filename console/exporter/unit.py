"""The systemd unit that runs the exporter as an unprivileged user (``--print-unit``).

The unit runs ``ExecStart`` with absolute paths and no shell, as ``DynamicUser=yes`` (or
``User=NAME``), with the sandboxing options of systemd.exec(5) that the exporter tolerates:
it reads the docker engine (``SupplementaryGroups=docker``: membership of that group is
root-equivalent on most hosts — drop the line and the ``containers`` source reports itself
down), NVML (``/dev/nvidia*``: devices stay visible), ``systemctl`` over D-Bus (read-only
queries are allowed to any user), Alertmanager and the engine over HTTP, and the console's
journal and probe runs read-only (the paths are passed in ``Environment=``; the exporter's user
needs read access to them).
"""

from __future__ import annotations

import re
from pathlib import Path

_UNSAFE = re.compile(r"[\s\"'\\;`]|[\x00-\x1f\x7f]")


def systemd_arg(value: str, what: str) -> str:
    """``value`` as one systemd ``ExecStart=``/``Environment=`` word: ``%`` doubled
    (specifiers), ``$`` doubled (variable expansion). Raises :class:`ValueError` naming
    ``what`` for whitespace, quotes, backslashes, ``;``, backquotes or control characters
    (they would need quoting rules this unit does not use: pick a path without them)."""
    if not value or _UNSAFE.search(value):
        raise ValueError(f"{what} {value!r}: cannot go in a systemd unit as one word "
                         "(whitespace, quotes, backslash, ';' or control characters); use a "
                         "path without them")
    return value.replace("%", "%%").replace("$", "$$")


def render_unit(argv: list[str], *, user: str | None, state_dir: Path, data_dir: Path,
                docker_group: bool = True) -> str:
    """The unit text. ``argv``: ``ExecStart`` (``argv[0]`` an absolute path); ``user``: run as
    this existing user (``User=``), ``None``: ``DynamicUser=yes``; ``state_dir`` /
    ``data_dir``: the console's journal and probe-run dirs, passed read-only. Raises
    :class:`ValueError` for a relative program or an argument :func:`systemd_arg` refuses."""
    if not Path(argv[0]).is_absolute():
        raise ValueError(f"ExecStart program {argv[0]!r}: must be an absolute path")
    exec_start = " ".join(systemd_arg(a, "ExecStart argument") for a in argv)
    who = (f"User={systemd_arg(user, 'user')}\nGroup={systemd_arg(user, 'user')}"
           if user else "DynamicUser=yes")
    sd = systemd_arg(str(state_dir), "state dir")
    dd = systemd_arg(str(data_dir), "data dir")
    docker = ("# the containers source reads the docker engine; this group is root-equivalent "
              "on most hosts:\n# remove the line to run without it (seat_source_up"
              "{source=\"containers\"} is then 0)\nSupplementaryGroups=docker\n"
              if docker_group else "")
    return f"""\
# seat-console exporter: the seat's hold, lease, silence, container, runbook, fit and source
# health as Prometheus metrics (read-only). Install: save as
# /etc/systemd/system/seat-console-exporter.service, then
# `systemctl daemon-reload && systemctl enable --now seat-console-exporter`.
[Unit]
Description=Seat Console exporter (read-only seat metrics for Prometheus)
Wants=network-online.target
After=network-online.target docker.service

[Service]
Type=simple
ExecStart={exec_start}
{who}
{docker}Environment=SEAT_CONSOLE_STATE_DIR={sd}
Environment=SEAT_CONSOLE_DATA_DIR={dd}
Environment=PYTHONUNBUFFERED=1
Restart=on-failure
RestartSec=5s
# sandboxing (systemd.exec(5)); the exporter never writes anywhere
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
CapabilityBoundingSet=
AmbientCapabilities=
SystemCallArchitectures=native
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
UMask=0077
MemoryMax=256M
CPUQuota=25%

[Install]
WantedBy=multi-user.target
"""


__all__ = ["render_unit", "systemd_arg"]
