"""Profile ``[backport]`` and ``[swap]``: strict validation with named errors (issue 8)."""

from __future__ import annotations

import pytest

from seat_console.core.profile import DEFAULT_FAILURE_PATTERNS, ProfileError, load_profile

MINIMAL = """
[resident]
name = "r"
[[silence.matchers]]
name = "instance"
value = "n:8000"
"""
DIGEST = "sha256:" + "ab" * 32
SHA = "cd" * 32


def _profile(tmp_path, backport: str = "", swap: str = "") -> object:
    (tmp_path / "patched.py").write_text("x = 1\n")
    f = tmp_path / "p.toml"
    f.write_text(MINIMAL + backport + swap)
    return load_profile(f)


def _backport(base: str = f"127.0.0.1:15000/engine@{DIGEST}", dest: str = "/usr/lib/x.py",
              source: str = "patched.py", sha: str | None = SHA, tag: str | None = None) -> str:
    lines = ["[backport]", f'base = "{base}"']
    if tag is not None:
        lines.append(f'tag = "{tag}"')
    lines += ['env = { SEAT_PLE_OFFLOAD = "1" }', "[[backport.files]]", f'source = "{source}"',
              f'dest = "{dest}"']
    if sha is not None:
        lines.append(f'original_sha256 = "{sha}"')
    return "\n" + "\n".join(lines) + "\n"


def _error(tmp_path, **kw) -> str:
    with pytest.raises(ProfileError) as exc:
        _profile(tmp_path, _backport(**kw))
    return str(exc.value)


def test_valid_backport_resolves_source_relative_to_the_profile(tmp_path):
    p = _profile(tmp_path, _backport()).profile
    assert p.backport.base.endswith(DIGEST)
    assert p.backport.files[0].source == tmp_path / "patched.py"
    assert p.backport.env == {"SEAT_PLE_OFFLOAD": "1"}
    assert "{content_hash}" in p.backport.tag
    assert p.swap is None


@pytest.mark.parametrize("base, says", [
    ("127.0.0.1:15000/engine:day0", "not pinned by digest"),
    ("127.0.0.1:15000/engine:day0@" + DIGEST, "drop the tag"),
    ("127.0.0.1:15000/engine@sha256:abc", "bad digest syntax"),
    ("127.0.0.1:15000/engine@sha256:" + "AB" * 32, "bad digest syntax"),
    ("Engine@" + DIGEST, "bad repository name"),
])
def test_bad_base_is_named(tmp_path, base, says):
    msg = _error(tmp_path, base=base)
    assert "backport.base" in msg and says in msg


def test_relative_dest_is_named(tmp_path):
    msg = _error(tmp_path, dest="usr/lib/x.py")
    assert "backport.files.0.dest" in msg and "relative path" in msg


def test_missing_source_file_is_named(tmp_path):
    msg = _error(tmp_path, source="nope.py")
    assert "backport.files.0.source" in msg and str(tmp_path / "nope.py") in msg
    assert "no such file" in msg


def test_bad_original_sha_and_tag_template(tmp_path):
    assert "64 lowercase hex" in _error(tmp_path, sha="1234")
    assert "must contain {content_hash}" in _error(tmp_path, tag="seat-backport:latest")
    assert "unknown placeholder" in _error(tmp_path, tag="seat-backport:{version}")
    assert "repo:tag" in _error(tmp_path, tag="Seat Backport:{content_hash}")


def test_duplicate_dest_refused(tmp_path):
    text = _backport() + '[[backport.files]]\nsource = "patched.py"\ndest = "/usr/lib/x.py"\n'
    with pytest.raises(ProfileError, match="appears twice"):
        _profile(tmp_path, text)


SWAP = """
[swap]
container = "seat-probe"
command = ["--model", "/m"]
volumes = ["/m:/m:ro"]
served_model_name = "seat-resident"
gpus = []
"""


def test_swap_defaults_and_patterns(tmp_path):
    p = _profile(tmp_path, swap=SWAP).profile
    assert p.swap.image == "backport" and p.swap.network_mode == "host"
    assert [f.name for f in p.swap.failure_patterns] == [f.name for f in DEFAULT_FAILURE_PATTERNS]
    assert p.swap.gpus == []


@pytest.mark.parametrize("extra, says", [
    ('volumes = ["m:/m"]', "absolute paths"),
    ('network_mode = "host"', None),
    ('[[swap.failure_patterns]]\nname = "x"\npattern = "(?=a)b"', "not valid RE2 syntax"),
])
def test_bad_swap_settings_are_named(tmp_path, extra, says):
    text = SWAP.replace('volumes = ["/m:/m:ro"]\n', "") + extra + "\n"
    if says is None:  # the same text with a good value loads (the test can tell good from bad)
        assert _profile(tmp_path, swap=text).profile.swap.network_mode == "host"
        bad = SWAP.replace('container = "seat-probe"', 'container = "bad name"')
        with pytest.raises(ProfileError, match="not a valid docker name"):
            _profile(tmp_path, swap=bad)
        return
    with pytest.raises(ProfileError) as exc:
        _profile(tmp_path, swap=text)
    assert says in str(exc.value) and "swap." in str(exc.value)
