"""``seat-console`` top-level options: bad values are usage errors naming the option and the
fix (exit 2), never a traceback or a console that spins or cannot render."""

from __future__ import annotations

import pytest

from seat_console.cli import main
from seat_console.core.profile import ProfileError, default_profile_text, parse_profile


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "-inf", "1e-9", "1e308"])
def test_interval_out_of_range_is_a_usage_error(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main([f"--interval={value}", "profile", "--show"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--interval" in err and "between 0.1 and 3600" in err


def test_interval_in_range_is_accepted(capsys, monkeypatch) -> None:
    monkeypatch.delenv("SEAT_CONSOLE_PROFILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent-for-tests")
    assert main(["--interval", "0.1", "profile", "--show"]) == 0
    assert main(["--interval", "3600", "profile", "--show"]) == 0


def test_profile_refresh_interval_has_the_same_floor() -> None:
    """A profile cannot ask for a poll loop faster than the CLI allows (0.1 s)."""
    with pytest.raises(ProfileError, match="refresh_interval_s"):
        parse_profile(default_profile_text().replace("refresh_interval_s = 1.0",
                                                      "refresh_interval_s = 0.001"), "p.toml")
