"""Errors of the docker engine as one sentence naming the engine's URL and the fix
(:func:`seat_console.node.docker.docker_error_sentence`): the CLI's build-backport,
image-check, restore and runbook said the SDK's repr ("('Connection aborted.',
FileNotFoundError(2, 'No such file or directory'))") and "$DOCKER_HOST" when it was not set."""

from __future__ import annotations

import socket

import docker
import pytest
from docker.errors import DockerException, NotFound

from seat_console.node.docker import docker_error_sentence
from seat_console.tui.runbook import human_error

RAW = ("Error while fetching server API version: ('Connection aborted.', "
       "FileNotFoundError(2, 'No such file or directory'))")


def test_no_socket_names_the_path_and_the_fix(tmp_path):
    host = f"unix://{tmp_path}/docker.sock"
    s = docker_error_sentence(DockerException(RAW), host)
    assert s == (f"cannot reach the docker engine at {host}: no socket at "
                 f"{tmp_path}/docker.sock. Start dockerd, or set node.docker_host in the profile "
                 "to the engine that runs the seat")


def test_a_real_sdk_error_reads_the_same(tmp_path):
    host = f"unix://{tmp_path}/docker.sock"
    with pytest.raises(DockerException) as got:
        docker.DockerClient(base_url=host, timeout=5).version()
    s = docker_error_sentence(got.value, host)
    assert s.startswith(f"cannot reach the docker engine at {host}: no socket at")


def test_the_environment_decides_when_the_profile_names_no_engine(tmp_path):
    host = f"unix://{tmp_path}/env.sock"
    s = docker_error_sentence(DockerException(RAW), None, {"DOCKER_HOST": host})
    assert f"at {host}:" in s and "$DOCKER_HOST" not in s.split(":", 1)[0]
    s = docker_error_sentence(DockerException(RAW), None, {})
    assert "at unix:///var/run/docker.sock" in s


@pytest.mark.parametrize("text, why", [
    ("('Connection aborted.', PermissionError(13, 'Permission denied'))",
     "permission denied on its socket (run as root or as a member of the docker group)"),
    ("('Connection aborted.', ConnectionRefusedError(111, 'Connection refused'))",
     "connection refused (nothing listens there)"),
    ("UnixHTTPConnectionPool(host='localhost', port=None): Read timed out. (read timeout=5)",
     "it did not answer in time"),
])
def test_the_cause_in_words(tmp_path, text, why):
    sock = tmp_path / "docker.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(sock))   # it exists: the cause is the error's, not a missing path
    try:
        s = docker_error_sentence(DockerException(text), f"unix://{sock}")
    finally:
        srv.close()
    assert s == (f"cannot reach the docker engine at unix://{sock}: {why}. Start dockerd, or "
                 "set node.docker_host in the profile to the engine that runs the seat")


def test_an_engine_that_answered_is_not_unreachable():
    exc = NotFound("404 Client Error", explanation="No such container: seat-resident")
    s = docker_error_sentence(exc, "tcp://127.0.0.1:2375")
    assert s == ("the docker engine at tcp://127.0.0.1:2375 refused: No such container: "
                 "seat-resident")


def test_an_unknown_cause_is_its_first_200_characters_on_one_line():
    s = docker_error_sentence(DockerException("odd\n" + "x" * 500), "tcp://10.0.0.1:2376")
    assert "odd " + "x" * 196 in s and "x" * 197 not in s and "\n" not in s


def test_the_tui_says_the_same(tmp_path):
    host = f"unix://{tmp_path}/docker.sock"
    assert human_error("swap", DockerException(RAW), host) == (
        "swap: " + docker_error_sentence(DockerException(RAW), host) + ".")
