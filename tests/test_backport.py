"""build-backport: on the lab's real dockerd and registry (engine:day0 pinned by digest), plus
unit tests of the stream check, diff size and Dockerfile quoting."""

from __future__ import annotations

import io
import re
import tarfile
import uuid
from pathlib import Path

import pytest

from seat_console.actions import backport as bp
from seat_console.actions.journal import Journal
from seat_console.actions.runbook import StepError
from seat_console.cli import main
from seat_console.core.profile import load_profile


# -- unit ----------------------------------------------------------------------------------------
def test_every_chunk_is_checked_for_errors():
    lines: list[str] = []
    ok = [{"stream": "Step 1/2 : FROM x\n"}, {"stream": " ---> abc\n"}, {"aux": {"ID": "sha256:1"}}]
    assert len(bp.check_stream(ok, lines.append, "build")) == 3 and lines[0] == "Step 1/2 : FROM x"
    bad = ok[:2] + [{"errorDetail": {"code": 1, "message": "COPY failed: no such file"}}]
    with pytest.raises(StepError, match="build failed: COPY failed") as exc:
        bp.check_stream(bad, lines.append, "build")
    assert "Step 1/2" in exc.value.output  # the log tail travels with the error
    with pytest.raises(StepError, match="push failed: denied"):
        bp.check_stream([{"status": "Preparing"}, {"error": "denied"}], lines.append, "push")


def test_diff_size_and_quoting():
    assert bp.diff_size(b"a\nb\n", b"a\nc\nd\n") == "3 lines changed (+2 −1)"
    assert bp.diff_size(b"x\n", b"x\n") == "identical"
    assert bp.diff_size(b"\xff\x00", b"\xff\x01\x02").startswith("binary: 2 B → 3 B")
    assert bp._q('a"b$HOME\\') == '"a\\"b\\$HOME\\\\"'


# -- lab -----------------------------------------------------------------------------------------
def _profile_with(lab, tmp_path: Path, *, dest: str = "/etc/issue", original: str | None = None,
                  base: str | None = None, tag_repo: str = "seat-backport-test",
                  content: bytes | None = None):
    """The lab profile with its [backport] pointed at a fresh patched file (unique content, so a
    unique content hash: the first build really builds)."""
    text = lab.profile_path.read_text("utf-8")
    loaded = load_profile(lab.profile_path)
    spec = loaded.profile.backport
    assert spec is not None, "the lab profile has no [backport]: run `python scripts/lab.py up`"
    patched = tmp_path / "issue"
    nonce = uuid.uuid4().hex
    patched.write_bytes(content if content is not None else
                        (b"Debian GNU/Linux 12 \\n \\l\n\n" + f"test {nonce}\n".encode()))
    text = text.replace(f'source = "{spec.files[0].source}"', f'source = "{patched}"')
    text = text.replace(f'dest = "{spec.files[0].dest}"', f'dest = "{dest}"')
    if original is not None:
        text = text.replace(f'original_sha256 = "{spec.files[0].original_sha256}"',
                            f'original_sha256 = "{original}"')
    if base is not None:
        text = text.replace(f'base = "{spec.base}"', f'base = "{base}"')
    text = text.replace("/seat-backport:{content_hash}", f"/{tag_repo}:{{content_hash}}")
    f = tmp_path / "profile.toml"
    f.write_text(text, "utf-8")
    return load_profile(f)


def _read_file(client, image_id: str, path: str) -> bytes:
    got = bp.read_image_files(client, image_id, [path])[path]
    assert got.kind == "file", got
    return got.data or b""


@pytest.fixture
def journal(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    with Journal() as j:
        yield j


@pytest.fixture
def cleanup_images(lab):
    made: list[str] = []
    yield made
    with lab.docker_client() as client:
        for ref in made:
            try:
                client.images.remove(ref, force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass


def test_build_replaces_one_real_file_then_a_rebuild_is_a_no_op(lab, tmp_path, journal,
                                                                  cleanup_images):
    loaded = _profile_with(lab, tmp_path)
    with lab.docker_client(timeout=120) as client:
        res = bp.build_runbook(loaded, client, journal).run()
        assert res.ok, res.describe()
        tag, image_id = res.facts["tag"], res.facts["image_id"]
        cleanup_images.append(tag)
        assert res.facts["no_op"] is False and re.fullmatch(r"sha256:[0-9a-f]{64}", image_id)
        attrs = client.images.get(tag).attrs
        labels = attrs["Config"]["Labels"]
        inputs = bp.BackportInputs.from_spec(loaded.profile.backport)
        assert labels["org.seat-console.backport.base"] == lab.engine_repo_digest
        assert labels["org.seat-console.backport.content-hash"] == inputs.content_hash
        assert labels["org.seat-console.backport.profile-sha256"] == loaded.sha256
        assert inputs.files[0].sha256 in labels["org.seat-console.backport.files"]
        assert "SEAT_LAB_BACKPORT=1" in attrs["Config"]["Env"]
        # the replaced file has the patch's bytes; the base's file is untouched
        patched = (tmp_path / "issue").read_bytes()
        assert _read_file(client, image_id, "/etc/issue") == patched
        assert _read_file(client, lab.engine_image_id, "/etc/issue") != patched
        # journaled with provenance
        rows = journal.entries(run_id=res.run_id)
        assert rows[-1].kind == "end" and rows[-1].outcome == "done"
        assert any(r.facts.get("image_id") == image_id for r in rows)
        # second build: same inputs, same tag, nothing built
        again = bp.build_runbook(loaded, client, journal).run()
        assert again.ok and again.facts["no_op"] is True and again.facts["image_id"] == image_id
        assert "no-op" in again.steps[1].detail and again.steps[1].status == "skipped"


@pytest.mark.parametrize("what", ["wrong-original", "missing-dest"])
def test_bad_file_fails_before_building(lab, tmp_path, journal, what):
    kw = ({"original": "0" * 64} if what == "wrong-original"
          else {"dest": "/etc/issue.typo"})
    loaded = _profile_with(lab, tmp_path, **kw)
    with lab.docker_client() as client:
        res = bp.build_runbook(loaded, client, journal).run()
        assert res.outcome == "refused", res.describe()
        want = "expects original_sha256" if what == "wrong-original" else "does not exist"
        assert want in (res.error or "")
        from docker.errors import ImageNotFound

        with pytest.raises(ImageNotFound):
            client.images.get(res.facts["tag"])


def test_base_without_repo_digest_is_refused_with_the_explanation(lab, tmp_path, journal,
                                                                   cleanup_images):
    # A locally built image: it has an image ID and no repo digest. Pasting its image ID as the
    # "digest" is the classic mistake.
    with lab.docker_client(timeout=120) as client:
        ctx = io.BytesIO()
        with tarfile.open(fileobj=ctx, mode="w") as tar:
            df = f"FROM {lab.engine_repo_digest}\nLABEL test={uuid.uuid4().hex}\n".encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(df)
            tar.addfile(info, io.BytesIO(df))
        ctx.seek(0)
        img, _ = client.images.build(fileobj=ctx, custom_context=True,
                                     tag="seat-backport-test-local:1", rm=True, forcerm=True)
        cleanup_images.append(img.id)
        assert not img.attrs.get("RepoDigests")
        base = f"127.0.0.1:15000/engine-local@{img.id}"
        loaded = _profile_with(lab, tmp_path, base=base)
        res = bp.build_runbook(loaded, client, journal).run()
    assert res.outcome == "refused"
    assert "is the IMAGE ID of a local image" in res.error and "repo digest" in res.error
    assert "seat-backport-test-local:1" in res.error


def test_a_failing_dockerfile_step_is_reported_failed_with_the_log(lab, tmp_path, journal,
                                                                    monkeypatch, cleanup_images):
    loaded = _profile_with(lab, tmp_path)
    real = bp.dockerfile_text
    monkeypatch.setattr(bp, "dockerfile_text",
                        lambda *a: real(*a) + "RUN /bin/sh -c 'echo seat-failing-step; exit 3'\n")
    with lab.docker_client(timeout=120) as client:
        res = bp.build_runbook(loaded, client, journal).run()
        cleanup_images.append(res.facts["tag"])
        assert res.outcome in ("undone", "partial") and not res.ok, res.describe()
        assert "returned a non-zero code: 3" in (res.error or "")
        fail = [r for r in journal.entries(run_id=res.run_id) if r.kind == "fail"]
        assert fail and "seat-failing-step" in fail[0].output  # the log tail is journaled
        from docker.errors import ImageNotFound

        with pytest.raises(ImageNotFound):
            client.images.get(res.facts["tag"])


def test_cli_dry_run_json_builds_nothing(lab, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEAT_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    loaded = _profile_with(lab, tmp_path)
    rc = main(["--profile", loaded.source, "build-backport", "--dry-run", "--json"])
    out = capsys.readouterr().out
    import json

    doc = json.loads(out)
    assert rc == 0 and doc["dry_run"] and doc["ok"]
    assert doc["steps"][1]["go"] and "1 line changed (+1 −0)" in doc["steps"][1]["text"]
    with lab.docker_client() as client:
        from docker.errors import ImageNotFound

        with pytest.raises(ImageNotFound):
            client.images.get(doc["tag"])


# -- property: the stream check on any chunk shapes ------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c,
                                                                         max_size=3),
                     max_leaves=8)
_CHUNK = st.dictionaries(st.sampled_from(["stream", "status", "progress", "aux", "error",
                                          "errorDetail", "id", "x"]), _JSON, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(_CHUNK | _JSON, max_size=12))
def test_property_stream_check_raises_only_step_error_and_never_misses_an_error(chunks):
    lines: list[str] = []
    has_error = any(isinstance(c, dict) and (c.get("error") or c.get("errorDetail"))
                    for c in chunks)
    try:
        seen = bp.check_stream(chunks, lines.append, "build")
    except StepError as exc:
        assert has_error and str(exc).startswith("build failed: ")
        return
    assert not has_error and all(isinstance(c, dict) for c in seen)
