"""Build a backport: the profile's patched files copied over a base image pinned by digest.

``seat-console build-backport`` runs the :func:`build_runbook` (journaled like every action):

1. **base image** — the base must be on the engine *by its repo digest*: ``RepoDigests`` of the
   local image contains ``repo@sha256:…``; else it is pulled by digest from the registry. A
   digest that is really a local **image ID** (the sha256 of the image's config JSON, what
   ``docker images --no-trunc`` shows; a built or ``docker load``-ed image has one but no repo
   digest until it is pushed) is refused with that explanation — the console never builds on
   something other than what the digest names.
2. **build** — precondition: every ``dest`` exists in the base as a regular file and, when the
   profile gives ``original_sha256``, hashes to it; read from a container that is *created and
   never started*, then removed (a typo'd path would otherwise add a new file and change
   nothing). The plan shows each file's diff size ("12 lines changed (+7 −5)"). If an image with
   the same content hash is already tagged, the step is skipped and says so (no-op). Apply: a
   generated Dockerfile (``FROM base@sha256:…``, ``COPY --chown``, ``ENV``, ``LABEL``s) built by
   the engine's classic builder through the docker SDK (``POST /build``); every streamed chunk
   is checked for ``error`` / ``errorDetail``, so a failed step never looks like success.
   Verify: the image is inspected (labels, ``ENV``) and each replaced file is read back from a
   created container and must hash to the patch's sha256. Undo: remove the image this run built.
3. **push** (``--push``) — push the tag to the registry named by its host part; every chunk is
   checked; the manifest digest the registry returns must appear in ``RepoDigests``; recorded
   in the journal (facts ``pushed_repo_digest``).

Provenance, as labels (``org.seat-console.backport.*``) and in the journal facts: the base
digest, each patch's sha256 and dest, the console version, the profile hash, the content hash
and the resulting image ID. The tag is the profile's ``backport.tag`` with ``{content_hash}``:
the first 16 hex digits of sha256 over (base, files' dest + sha256 + mode, env), so the same
inputs give the same tag.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from seat_console.actions.journal import Journal
from seat_console.actions.runbook import Check, Observer, Plan, Runbook, RunContext, Step, StepError
from seat_console.core.profile import BackportSpec, LoadedProfile
from seat_console.node.image_files import ImageFile, ImageReadError
from seat_console.node.image_files import read_image_files as _read_image_files

LABEL_PREFIX = "org.seat-console.backport"
"""Label namespace of the provenance labels on a backport image."""
FORMAT = "seat-backport/1"
"""Version of the content-hash input layout (part of the hash: a new layout gives new tags)."""
MAX_FILE_BYTES = 256 << 20
"""Largest file (bytes) read back from an image for hashing: 256 MiB (a patched source file is
kilobytes; a bigger dest is almost certainly the wrong path)."""
BUILD_TIMEOUT_S = 1800
"""Client timeout (s) for a build or push API call."""


class BackportError(Exception):
    """The backport cannot be built: message names the input and the fix."""


def console_version() -> str:
    """The installed seat-console version (``"unknown"`` when not installed as a package)."""
    try:
        return metadata.version("seat-console")
    except metadata.PackageNotFoundError:  # pragma: no cover - always installed here
        return "unknown"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class PatchFile:
    """One patch as the build uses it: ``source`` (local file), ``dest`` (in the image),
    ``sha256`` of the source, ``original_sha256`` (from the profile, or ``None``)."""

    source: Path
    dest: str
    sha256: str
    original_sha256: str | None


@dataclass(frozen=True)
class BackportInputs:
    """Everything the build depends on, and the tag it gets.

    ``base``: ``repo@sha256:…``; ``base_repo`` / ``base_digest`` its two parts; ``content_hash``:
    16 hex digits (module docstring); ``tag``: the template filled in.
    """

    base: str
    base_repo: str
    base_digest: str
    files: tuple[PatchFile, ...]
    env: tuple[tuple[str, str], ...]
    content_hash: str
    tag: str

    @classmethod
    def from_spec(cls, spec: BackportSpec) -> BackportInputs:
        """Hash each source file and fill in the tag. Raises :class:`BackportError` when a
        source file cannot be read (it existed when the profile was loaded)."""
        repo, _, digest = spec.base.partition("@")
        files = []
        for f in spec.files:
            try:
                files.append(PatchFile(f.source, f.dest, sha256_file(f.source), f.original_sha256))
            except OSError as exc:
                raise BackportError(f"backport source {f.source}: cannot read: {exc}") from None
        env = tuple(sorted(spec.env.items()))
        canon = json.dumps({"format": FORMAT, "base": spec.base,
                            "files": [{"dest": p.dest, "sha256": p.sha256} for p in files],
                            "env": env}, sort_keys=True, separators=(",", ":"))
        content_hash = hashlib.sha256(canon.encode()).hexdigest()[:16]
        return cls(base=spec.base, base_repo=repo, base_digest=digest, files=tuple(files),
                   env=env, content_hash=content_hash,
                   tag=spec.tag.format(content_hash=content_hash))

    @property
    def tag_repo(self) -> str:
        """The tag's repository part (``host:port/name``)."""
        return self.tag.rsplit(":", 1)[0]

    @property
    def tag_name(self) -> str:
        """The tag's tag part."""
        return self.tag.rsplit(":", 1)[1]


# -- reading files from an image ------------------------------------------------------------------
def read_image_files(client: Any, image_id: str, paths: Iterable[str]) -> dict[str, ImageFile]:
    """:func:`seat_console.node.image_files.read_image_files` (a container created, never
    started, and removed), its :class:`~seat_console.node.image_files.ImageReadError` raised as
    :class:`BackportError`."""
    try:
        return _read_image_files(client, image_id, paths, max_bytes=MAX_FILE_BYTES,
                                 label=f"{LABEL_PREFIX}.reader")
    except ImageReadError as exc:
        raise BackportError(str(exc)) from None


def diff_size(old: bytes, new: bytes) -> str:
    """How big a change is, for the plan: ``"12 lines changed (+7 −5)"`` for UTF-8 text (from
    :func:`difflib.unified_diff`), ``"binary: 1,024 B → 1,030 B"`` otherwise, ``"identical"``."""
    if old == new:
        return "identical"
    try:
        a, b = old.decode("utf-8").splitlines(), new.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return f"binary: {len(old):,} B → {len(new):,} B"
    plus = minus = 0
    for line in difflib.unified_diff(a, b, lineterm="", n=0):
        if line.startswith(("+++", "---", "@@")):
            continue
        if line.startswith("+"):
            plus += 1
        elif line.startswith("-"):
            minus += 1
    n = plus + minus
    return f"{n} line{'' if n == 1 else 's'} changed (+{plus} −{minus})"


# -- base image ----------------------------------------------------------------------------------
def explain_no_digest(inputs: BackportInputs, local_image: Mapping[str, Any] | None) -> str:
    """The refusal text when the base digest names no pullable image: image ID vs digest."""
    base = inputs.base
    if local_image is not None:
        tags = ", ".join(local_image.get("RepoTags") or []) or "untagged"
        return (f"{base}: {inputs.base_digest} is the IMAGE ID of a local image ({tags}), not a "
                "repo digest. An image ID is the sha256 of the image's config, local to one "
                "engine; a repo digest is the sha256 of the registry manifest and exists only "
                "once the image is pushed to (or pulled from) a registry. This image was built "
                "or loaded locally and has no repo digest, so nothing pins it. Push it "
                f"(`docker push {inputs.base_repo}:TAG`) and set backport.base to the "
                "repo@sha256:… the push prints.")
    return (f"{base}: no local image has this repo digest and the registry did not serve it. "
            "Check the digest (`docker inspect -f '{{.RepoDigests}}' IMAGE` on a machine that "
            "has it) — an image ID (`docker images --no-trunc`) is not a digest.")


def find_base(client: Any, inputs: BackportInputs) -> dict[str, Any] | None:
    """The local image whose ``RepoDigests`` contains ``inputs.base`` (inspect dict), or
    ``None``."""
    from docker.errors import ImageNotFound

    try:
        img = client.images.get(inputs.base)
    except ImageNotFound:
        return None
    if inputs.base in (img.attrs.get("RepoDigests") or []):
        return img.attrs
    return None


def image_by_id(client: Any, image_id: str) -> dict[str, Any] | None:
    """Inspect an image by ID (``sha256:…``), or ``None``."""
    from docker.errors import ImageNotFound

    try:
        return client.images.get(image_id).attrs
    except ImageNotFound:
        return None


def check_stream(chunks: Iterable[Mapping[str, Any]], on_line: Callable[[str], None],
                 what: str) -> list[Mapping[str, Any]]:
    """Consume a build/push/pull JSON stream; every chunk is checked for ``error`` /
    ``errorDetail``. Calls ``on_line`` with each log line; returns every chunk. Raises
    :class:`~seat_console.actions.runbook.StepError` with the error and the log's last lines."""
    seen: list[Mapping[str, Any]] = []
    tail: list[str] = []
    for ch in chunks:
        if not isinstance(ch, Mapping):
            continue
        seen.append(ch)
        text = ch.get("stream") or ch.get("status") or ""
        if ch.get("progress") is None and text:
            for line in str(text).splitlines():
                if line.strip():
                    tail.append(line)
                    del tail[:-40]
                    on_line(line)
        if ch.get("error") or ch.get("errorDetail"):
            detail = ch.get("errorDetail") or {}
            msg = ch.get("error") or (detail.get("message") if isinstance(detail, Mapping) else
                                      str(detail))
            raise StepError(f"{what} failed: {msg}", "\n".join(tail[-20:] + [str(msg)]))
    return seen


# -- the Dockerfile ------------------------------------------------------------------------------
def _q(value: str) -> str:
    """A Dockerfile double-quoted word: backslash, quote and ``$`` escaped (no substitution)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def provenance_labels(inputs: BackportInputs, profile_sha256: str) -> dict[str, str]:
    """The provenance labels (module docstring)."""
    return {
        f"{LABEL_PREFIX}.content-hash": inputs.content_hash,
        f"{LABEL_PREFIX}.base": inputs.base,
        f"{LABEL_PREFIX}.files": json.dumps(
            [{"dest": p.dest, "sha256": p.sha256, "original_sha256": p.original_sha256}
             for p in inputs.files], separators=(",", ":")),
        f"{LABEL_PREFIX}.env": json.dumps(dict(inputs.env), separators=(",", ":")),
        f"{LABEL_PREFIX}.console-version": console_version(),
        f"{LABEL_PREFIX}.profile-sha256": profile_sha256,
    }


def dockerfile_text(inputs: BackportInputs, originals: Mapping[str, ImageFile],
                    profile_sha256: str) -> str:
    """The generated Dockerfile: ``FROM base@sha256``, one ``COPY --chown`` per file (context
    path ``files/<n>``, the original's owner; its mode comes from the context file), one ``ENV``
    and one ``LABEL`` instruction (each a layer-less config change)."""
    lines = ["# Generated by seat-console build-backport; do not edit.", f"FROM {inputs.base}"]
    for i, p in enumerate(inputs.files):
        o = originals.get(p.dest)
        chown = f"--chown={o.uid}:{o.gid} " if o is not None else ""
        lines.append(f"COPY {chown}{json.dumps([f'files/{i}', p.dest])}")
    if inputs.env:
        lines.append("ENV " + " \\\n    ".join(f"{k}={_q(v)}" for k, v in inputs.env))
    lines.append("LABEL " + " \\\n      ".join(
        f"{k}={_q(v)}" for k, v in provenance_labels(inputs, profile_sha256).items()))
    return "\n".join(lines) + "\n"


def write_context(directory: Path, inputs: BackportInputs, originals: Mapping[str, ImageFile],
                  profile_sha256: str) -> str:
    """Write the build context (Dockerfile + ``files/<n>`` with the original's mode) into
    ``directory``; returns the Dockerfile text."""
    (directory / "files").mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(inputs.files):
        target = directory / "files" / str(i)
        shutil.copyfile(p.source, target)
        o = originals.get(p.dest)
        target.chmod(o.mode if o is not None else 0o644)
    text = dockerfile_text(inputs, originals, profile_sha256)
    (directory / "Dockerfile").write_text(text, "utf-8")
    return text


# -- preflight -----------------------------------------------------------------------------------
def check_files(inputs: BackportInputs, found: Mapping[str, ImageFile]) -> list[str]:
    """One plan line per file (``/etc/issue: sha256 ok, 2 lines changed (+1 −1)``); raises
    :class:`StepError` naming every file that is missing, not a regular file, or not the
    expected original."""
    lines, errors = [], []
    for p in inputs.files:
        f = found.get(p.dest) or ImageFile(p.dest, "missing")
        if f.kind == "missing":
            errors.append(f"{p.dest} does not exist in the base image: a COPY would add a new "
                          "file and the backport would change nothing (check the path: "
                          f"`docker run --rm {inputs.base} ls -l {p.dest}`)")
        elif f.kind == "symlink":
            errors.append(f"{p.dest} is a symlink to {f.link_target!r} in the base image: give "
                          "the file it points to as dest")
        elif f.kind != "file":
            errors.append(f"{p.dest} is a {f.kind} in the base image, not a regular file")
        elif p.original_sha256 and f.sha256 != p.original_sha256:
            errors.append(f"{p.dest}: the base image's file has sha256 {f.sha256}, the profile "
                          f"expects original_sha256 {p.original_sha256}: the patch was written "
                          "against another version of this file (wrong base, or wrong dest)")
        else:
            with open(p.source, "rb") as fh:
                new = fh.read()
            assert f.data is not None
            state = "sha256 ok" if p.original_sha256 else "no original_sha256 given"
            lines.append(f"{p.dest}: {state}, {diff_size(f.data, new)}")
    if errors:
        raise StepError("preflight: " + "; ".join(errors))
    return lines


# -- the runbook ---------------------------------------------------------------------------------
@dataclass
class BuildOptions:
    """``push``: push the tag after building; ``on_log``: called with each build/push log
    line (the TUI's log pane, the CLI's stderr)."""

    push: bool = False
    on_log: Callable[[str], None] = lambda line: None


def build_runbook(loaded: LoadedProfile, client: Any, journal: Journal | None, *,
                  options: BuildOptions | None = None,
                  observer: Observer | None = None) -> Runbook:
    """The ``build-backport`` runbook for the profile's ``[backport]`` on the docker engine
    ``client``. Raises :class:`BackportError` when the profile has no ``[backport]``."""
    spec = loaded.profile.backport
    if spec is None:
        raise BackportError(f"{loaded.source}: the profile has no [backport] table: add one "
                            "(base = 'repo@sha256:…', [[backport.files]] source/dest; see "
                            "`seat-console profile --print-default`)")
    opts = options or BuildOptions()
    inputs = BackportInputs.from_spec(spec)

    def base_check(ctx: RunContext) -> Check:
        img = find_base(client, inputs)
        if img is not None:
            ctx.facts["base_image_id"] = img["Id"]
            return Check(False, f"base {inputs.base} is here (image ID {img['Id'][:19]}…; "
                                "RepoDigests has the digest)")
        local = image_by_id(client, inputs.base_digest)
        if local is not None:
            raise StepError(explain_no_digest(inputs, local))
        return Check(True, f"pull base {inputs.base} by digest from its registry")

    def base_apply(ctx: RunContext) -> str:
        try:
            chunks = client.api.pull(inputs.base_repo, tag=inputs.base_digest, stream=True,
                                     decode=True)
            check_stream(chunks, opts.on_log, f"pull {inputs.base}")
        except StepError:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK's errors: APIError, ConnectionError
            raise StepError(f"pull {inputs.base}: {exc}. " + explain_no_digest(inputs, None)
                            ) from None
        return f"pulled {inputs.base}"

    def base_verify(ctx: RunContext) -> str:
        img = find_base(client, inputs)
        if img is None:
            raise StepError(f"after the pull, no local image has repo digest {inputs.base}")
        ctx.facts["base_image_id"] = img["Id"]
        return f"base {inputs.base} is image ID {img['Id']}"

    def existing_build() -> dict[str, Any] | None:
        from docker.errors import ImageNotFound

        try:
            attrs = client.images.get(inputs.tag).attrs
        except ImageNotFound:
            return None
        labels = (attrs.get("Config") or {}).get("Labels") or {}
        return attrs if labels.get(f"{LABEL_PREFIX}.content-hash") == inputs.content_hash else None

    def build_check(ctx: RunContext) -> Check:
        base_id = ctx.facts.get("base_image_id")
        if base_id is None:
            img = find_base(client, inputs)
            base_id = img["Id"] if img else None
        if base_id is None:
            return Check(True, f"after the pull: check {len(inputs.files)} file(s) in the base, "
                               f"then build {inputs.tag}")
        found = read_image_files(client, base_id, [p.dest for p in inputs.files])
        lines = check_files(inputs, found)
        ctx.facts["files"] = lines
        prior = existing_build()
        if prior is not None:
            ctx.facts.update(image_id=prior["Id"], tag=inputs.tag, no_op=True)
            return Check(False, f"no-op: {inputs.tag} (image ID {prior['Id']}) was already built "
                                f"from the same inputs (content hash {inputs.content_hash}); "
                                "nothing to build")
        return Check(True, f"build {inputs.tag} FROM {inputs.base}: " + "; ".join(lines))

    def build_apply(ctx: RunContext) -> str:
        base_id = ctx.facts["base_image_id"]
        found = read_image_files(client, base_id, [p.dest for p in inputs.files])
        check_files(inputs, found)
        with tempfile.TemporaryDirectory(prefix="seat-backport-") as d:
            dockerfile = write_context(Path(d), inputs, found, loaded.sha256)
            ctx.facts["dockerfile"] = dockerfile
            ctx.facts["built_by_run"] = True
            try:
                chunks = client.api.build(path=d, dockerfile="Dockerfile", tag=inputs.tag,
                                          rm=True, forcerm=True, pull=False, decode=True,
                                          timeout=BUILD_TIMEOUT_S)
                seen = check_stream(chunks, opts.on_log, f"build {inputs.tag}")
            except StepError:
                raise
            except Exception as exc:  # noqa: BLE001 - APIError, ConnectionError, BuildError
                raise StepError(f"build {inputs.tag}: {exc}") from None
        image_id = None
        for ch in seen:
            aux = ch.get("aux")
            if isinstance(aux, Mapping) and aux.get("ID"):
                image_id = aux["ID"]
        ctx.facts["image_id"] = image_id
        lines = [str(ch.get("stream", "")).rstrip() for ch in seen if ch.get("stream")]
        return "\n".join(lines[-20:])

    def build_verify(ctx: RunContext) -> str:
        from docker.errors import ImageNotFound

        try:
            attrs = client.images.get(inputs.tag).attrs
        except ImageNotFound:
            raise StepError(f"the build reported success but {inputs.tag} does not exist") from None
        if ctx.facts.get("image_id") and attrs["Id"] != ctx.facts["image_id"]:
            raise StepError(f"{inputs.tag} is image {attrs['Id']}, the build made "
                            f"{ctx.facts['image_id']}")
        labels = (attrs.get("Config") or {}).get("Labels") or {}
        want = provenance_labels(inputs, loaded.sha256)
        bad = [k for k, v in want.items() if labels.get(k) != v]
        if bad:
            raise StepError(f"{inputs.tag}: provenance labels missing or wrong: {bad}")
        env = (attrs.get("Config") or {}).get("Env") or []
        missing_env = [f"{k}={v}" for k, v in inputs.env if f"{k}={v}" not in env]
        if missing_env:
            raise StepError(f"{inputs.tag}: ENV missing {missing_env}")
        got = read_image_files(client, attrs["Id"], [p.dest for p in inputs.files])
        wrong = [p.dest for p in inputs.files if got[p.dest].sha256 != p.sha256]
        if wrong:
            raise StepError(f"{inputs.tag}: replaced file(s) do not hash to the patch: {wrong}")
        ctx.facts.update(image_id=attrs["Id"], tag=inputs.tag, no_op=False)
        return (f"{inputs.tag} is image ID {attrs['Id']}; labels and "
                f"{len(inputs.files)} replaced file(s) verified")

    def build_undo(ctx: RunContext) -> str:
        from docker.errors import APIError, ImageNotFound

        if not ctx.facts.get("built_by_run") or not ctx.facts.get("image_id"):
            return "nothing was built"
        try:
            client.images.remove(ctx.facts["image_id"], force=False, noprune=False)
        except ImageNotFound:
            return "the built image is already gone"
        except APIError as exc:
            raise StepError(f"cannot remove {ctx.facts['image_id']}: "
                            f"{exc.explanation or exc}") from None
        return f"removed {ctx.facts['image_id']}"

    def push_check(ctx: RunContext) -> Check:
        host = inputs.tag_repo.split("/", 1)[0] if "/" in inputs.tag_repo else ""
        if not host or not (host == "localhost" or "." in host or ":" in host):
            raise StepError(f"--push: the tag {inputs.tag} names no registry host; set "
                            "backport.tag to 'host:port/name:{content_hash}'")
        return Check(True, f"push {inputs.tag} to {inputs.tag_repo.split('/', 1)[0]}")

    def push_apply(ctx: RunContext) -> str:
        try:
            chunks = client.api.push(inputs.tag_repo, tag=inputs.tag_name, stream=True,
                                     decode=True)
            seen = check_stream(chunks, opts.on_log, f"push {inputs.tag}")
        except StepError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise StepError(f"push {inputs.tag}: {exc}") from None
        for ch in seen:
            aux = ch.get("aux")
            if isinstance(aux, Mapping) and aux.get("Digest"):
                ctx.facts["pushed_digest"] = aux["Digest"]
        if not ctx.facts.get("pushed_digest"):
            raise StepError(f"push {inputs.tag}: the registry returned no manifest digest")
        return f"pushed, digest {ctx.facts['pushed_digest']}"

    def push_verify(ctx: RunContext) -> str:
        ref = f"{inputs.tag_repo}@{ctx.facts['pushed_digest']}"
        attrs = client.images.get(inputs.tag).attrs
        if ref not in (attrs.get("RepoDigests") or []):
            raise StepError(f"after the push, RepoDigests of {inputs.tag} lacks {ref}")
        ctx.facts["pushed_repo_digest"] = ref
        return f"repo digest {ref}"

    steps = [
        Step("base image", base_check, base_apply, base_verify, None,
             manual="nothing to undo: a pulled base image is left on the engine"),
        Step("build", build_check, build_apply, build_verify, build_undo,
             manual=lambda ctx: f"docker rmi {ctx.facts.get('image_id') or inputs.tag}"),
    ]
    if opts.push:
        steps.append(Step("push", push_check, push_apply, push_verify, None,
                          manual=f"a pushed tag stays in the registry: delete "
                                 f"{inputs.tag} there by hand if it must go"))
    return Runbook("build-backport", steps, journal=journal, observer=observer,
                   inputs={"base": inputs.base, "tag": inputs.tag,
                           "content_hash": inputs.content_hash, "push": opts.push,
                           "files": [{"source": str(p.source), "dest": p.dest,
                                      "sha256": p.sha256, "original_sha256": p.original_sha256}
                                     for p in inputs.files],
                           "env": dict(inputs.env), "console_version": console_version()},
                   facts={"content_hash": inputs.content_hash, "tag": inputs.tag},
                   profile_sha256=loaded.sha256)


def plan_build(loaded: LoadedProfile, client: Any, *, push: bool = False) -> Plan:
    """The dry-run plan (nothing is pulled, built or pushed; reading files creates and removes
    a never-started container)."""
    return build_runbook(loaded, client, None, options=BuildOptions(push=push)).plan()


__all__ = ["BackportError", "BackportInputs", "BuildOptions", "ImageFile", "LABEL_PREFIX",
           "PatchFile", "build_runbook", "check_files", "check_stream", "diff_size",
           "dockerfile_text", "explain_no_digest", "plan_build", "provenance_labels",
           "read_image_files"]
