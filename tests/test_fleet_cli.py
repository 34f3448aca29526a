"""`seat-console fleet` without a Prometheus: exit codes, flags before and after the
subcommand, the screen refused without a terminal."""

from __future__ import annotations

import json
import socket

from seat_console import cli


def _dead_url() -> str:
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_json_prometheus_unreachable_is_3_with_the_reason(capsys):
    rc = cli.main(["fleet", "--json", "--prometheus", _dead_url(), "--alertmanager", "none"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert rc == 3 and doc["ok"] is False and doc["rows"] == []
    assert "cannot reach" in doc["error"] and "cannot reach" in err


def test_bad_urls_and_interval(capsys):
    assert cli.main(["fleet", "--json", "--prometheus", "ftp://x"]) == 1
    assert "not an http(s) URL" in capsys.readouterr().err
    assert cli.main(["fleet", "--json", "--prometheus", _dead_url(),
                     "--alertmanager", "nope"]) == 1
    assert "--alertmanager 'nope'" in capsys.readouterr().err
    assert cli.main(["fleet", "--json", "--interval", "0.5"]) == 2
    assert cli.main(["--interval", "0.5", "fleet", "--json"]) == 2   # global form, same rule
    assert "at most once a second" in capsys.readouterr().err


def test_screen_without_a_terminal_is_refused(capsys):
    rc = cli.main(["fleet", "--prometheus", _dead_url()])     # pytest's stdout is not a tty
    assert rc == 2 and "fleet --json" in capsys.readouterr().err
