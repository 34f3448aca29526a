"""Seat profile: lookup order, strict validation, and the embedded default's figures."""

from __future__ import annotations

import json

import pytest

from seat_console.cli import main
from seat_console.core.profile import (
    ENV_VAR,
    GiB,
    ProfileError,
    default_profile_text,
    load_profile,
    parse_profile,
)

MINIMAL = """
[resident]
name = "r"
[[silence.matchers]]
name = "instance"
value = "n:8000"
"""


def test_embedded_default_is_the_problem_statement_seat():
    p = parse_profile(default_profile_text(), "<embedded default>")
    assert p.seat.tensor_parallel_size == 2
    assert p.seat.gpu_memory_utilization == 0.90
    assert p.seat.max_model_len == 262_144
    assert p.seat.max_num_seqs == 256
    # "~95.0 GiB CUDA-visible each": 95.0 × 2^30 B.
    assert p.node.declared_cuda_visible_bytes == 95 * GiB
    # 62.56 GiB per card, parsed by pydantic ByteSize as int(62.56 × 2^30) B.
    assert p.candidate.weights_bytes_per_rank == int(62.56 * GiB)
    assert p.candidate.ple_bytes == 51_201_966_080
    assert p.candidate.ple_placement == "gpu-replicated"
    assert len(p.timers.conformance) == 2 and p.timers.remediation.endswith(".timer")


def test_unknown_key_is_named_with_file(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(MINIMAL + "\n[seat]\ntensor_paralel_size = 2\n")
    with pytest.raises(ProfileError) as exc:
        load_profile(f)
    msg = str(exc.value)
    assert str(f) in msg
    assert "seat.tensor_paralel_size" in msg and "unknown key" in msg


def test_wrong_type_is_explained():
    with pytest.raises(ProfileError) as exc:
        parse_profile(MINIMAL + "\n[seat]\ngpu_memory_utilization = 'high'\n", "x.toml")
    assert "seat.gpu_memory_utilization" in str(exc.value)
    assert "'high'" in str(exc.value)


def test_toml_syntax_error_names_file_and_line():
    with pytest.raises(ProfileError, match=r"x.toml: not valid TOML.*line 2"):
        parse_profile("[seat]\ntensor_parallel_size = = 2\n", "x.toml")


def test_tp_needs_enough_gpus():
    with pytest.raises(ProfileError, match="tensor_parallel_size = 4 needs at least"):
        parse_profile(MINIMAL + "\n[seat]\ntensor_parallel_size = 4\n", "x.toml")


def test_timer_names_must_be_timer_units():
    with pytest.raises(ProfileError, match="not a timer unit name"):
        parse_profile(MINIMAL + "\n[timers]\nremediation = 'fleet-remediation.service'\n", "x")


def test_sizes_accept_units_and_bytes():
    p = parse_profile(MINIMAL.replace('name = "r"', 'name = "r"\nple_bytes = "1 GiB"\n'
                                      'weights_bytes_per_rank = 1000'), "x")
    assert p.resident.ple_bytes == GiB and p.resident.weights_bytes_per_rank == 1000


def test_lookup_order(tmp_path, monkeypatch):
    cli = tmp_path / "cli.toml"
    env = tmp_path / "env.toml"
    xdg = tmp_path / "xdg" / "seat-console" / "profile.toml"
    for f, name in ((cli, "from-cli"), (env, "from-env"), (xdg, "from-xdg")):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(MINIMAL.replace('name = "r"', f'name = "{name}"'))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(ENV_VAR, str(env))
    assert load_profile(cli).profile.resident.name == "from-cli"
    assert load_profile().profile.resident.name == "from-env"
    monkeypatch.delenv(ENV_VAR)
    lp = load_profile()
    assert (lp.profile.resident.name, lp.origin) == ("from-xdg", "xdg")
    xdg.unlink()
    assert load_profile().origin == "default"


def test_missing_cli_profile_says_fix(tmp_path):
    with pytest.raises(ProfileError, match="no such file"):
        load_profile(tmp_path / "nope.toml")


def test_profile_cli_check_and_print_default(tmp_path, capsys):
    assert main(["profile", "--print-default"]) == 0
    text = capsys.readouterr().out
    f = tmp_path / "p.toml"
    f.write_text(text)
    assert main(["profile", "--check", str(f)]) == 0
    assert "ok (sha256" in capsys.readouterr().out
    f.write_text(text.replace("max_num_seqs", "max_num_seq"))
    assert main(["profile", "--check", str(f)]) == 1
    assert "seat.max_num_seq: unknown key" in capsys.readouterr().err


def test_profile_show_is_json(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(["profile", "--show"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["origin"] == "default"
    assert data["profile"]["candidate"]["ple_bytes"] == 51_201_966_080


def test_a_directory_given_as_the_profile_is_named_as_one(tmp_path):
    """``--profile DIR`` (or the variable) exists but is a directory: say that, not 'no such file'."""
    with pytest.raises(ProfileError) as exc:
        load_profile(tmp_path, environ={})
    assert f"--profile {tmp_path}: is a directory" in str(exc.value)
    assert "no such file" not in str(exc.value)
    with pytest.raises(ProfileError) as exc:
        load_profile(None, environ={"SEAT_CONSOLE_PROFILE": str(tmp_path)})
    assert f"$SEAT_CONSOLE_PROFILE={tmp_path}: is a directory" in str(exc.value)


@pytest.mark.parametrize(("old", "new", "key"), [
    ("max_model_len = 262144", "max_model_len = 99999999999999999999999", "seat.max_model_len"),
    ("max_num_seqs = 256", "max_num_seqs = 9999999999", "seat.max_num_seqs"),
    ('weights_bytes_per_rank = "62.56 GiB"', 'weights_bytes_per_rank = "99999999 PiB"',
     "candidate.weights_bytes_per_rank"),
    ("ple_bytes = 51201966080", "ple_bytes = 99999999999999999999999", "candidate.ple_bytes"),
    ('declared_cuda_visible_bytes = "95.0 GiB"', 'declared_cuda_visible_bytes = "2 PiB"',
     "node.declared_cuda_visible_bytes"),
])
def test_absurdly_large_numbers_are_rejected_with_the_key(old, new, key):
    """A typo'd extra digits must not become a 10^23-token context or a 10^14 GiB budget."""
    text = default_profile_text()
    assert old in text
    with pytest.raises(ProfileError) as exc:
        parse_profile(text.replace(old, new), "p.toml")
    assert key in str(exc.value) and "p.toml" in str(exc.value)


def test_check_names_the_option_typed(tmp_path, capsys):
    assert main(["profile", "--check", str(tmp_path / "nowhere.toml")]) == 1
    err = capsys.readouterr().err
    assert f"--check {tmp_path / 'nowhere.toml'}: no such file" in err
    assert "--profile" not in err


def test_undecodable_profile_says_how_to_fix(tmp_path):
    f = tmp_path / "p.toml"
    f.write_bytes(b"\xff\xfe[seat]\n")
    with pytest.raises(ProfileError, match=r"cannot read profile: .*save it as UTF-8 TOML"):
        load_profile(f)


@pytest.mark.parametrize("size", ["1e30 GiB", "2.5E3 MiB", " 1e3 ", "6e-1GiB"])
def test_a_size_with_an_exponent_is_named_as_such(size) -> None:
    """The trial: ``"1e30 GiB"`` gave "could not interpret byte unit: e30" (pydantic read 1
    with the unit e30); the unit was fine. The message names the exponent and the fix."""
    import re as _re

    from seat_console.core.profile import ProfileError, default_profile_text, parse_profile

    text = _re.sub(r'weights_bytes_per_rank = "[^"]*"', f'weights_bytes_per_rank = "{size}"',
                   default_profile_text(), count=1)
    with pytest.raises(ProfileError, match="a number with an exponent is not read as a size"):
        parse_profile(text, "p.toml")
    ok = _re.sub(r'weights_bytes_per_rank = "[^"]*"', 'weights_bytes_per_rank = "62.56 GiB"',
                 default_profile_text(), count=1)
    assert parse_profile(ok, "p.toml").resident.weights_bytes_per_rank == round(62.56 * 2**30)


@pytest.mark.parametrize("value", ["1e308", "36.5", "1e20"])
def test_a_whole_number_field_names_its_range(value) -> None:
    """The trial: ``ttl_s = 1e308`` got pydantic's "Unable to parse input string as an
    integer, exceeded maximum size"; a reader needs the range they may write."""
    import re as _re

    from seat_console.core.profile import ProfileError, default_profile_text, parse_profile

    text = _re.sub(r"(?m)^ttl_s = .*$", f"ttl_s = {value}", default_profile_text(), count=1)
    with pytest.raises(ProfileError) as exc:
        parse_profile(text, "p.toml")
    assert "silence.ttl_s: must be a whole number from 60 to 604,800" in str(exc.value)


def test_a_whole_number_field_without_bounds_says_whole_number() -> None:
    import re as _re

    from seat_console.core.profile import ProfileError, default_profile_text, parse_profile

    text = _re.sub(r"(?m)^max_num_seqs = .*$", "max_num_seqs = 2.5", default_profile_text(),
                   count=1)
    with pytest.raises(ProfileError, match=r"seat.max_num_seqs: must be a whole number"):
        parse_profile(text, "p.toml")
