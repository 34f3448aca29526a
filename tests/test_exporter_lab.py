"""The exporter against the lab's real node, Alertmanager and Prometheus (``lab.py`` runs
``seat-console exporter`` on 127.0.0.1:19469 and Prometheus on 127.0.0.1:19090).

Its output is parsed back with prometheus_client's own parser and checked against what the
node says (systemd through ``docker exec``, Alertmanager's API): a hold placed with the real
``seat-console hold --yes`` flips the hold metrics; the lease cancelled by hand
(``systemctl stop`` of the lease timer) is a hold without a lease; release brings them back;
Alertmanager stopped is ``seat_source_up{source="silences"} 0`` while the scrape still answers;
and the lab's Prometheus sees the hold.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from conftest import wait_until
from prometheus_client.parser import text_string_to_metric_families
from test_hold_lab import (  # noqa: F401 - fixtures
    active_timers,
    baseline,
    cli,
    env,
    exclusive,
    hold_units,
    node,
    silences_of,
)

from seat_console.actions.node_ops import node_leases

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str, timeout: float = 10.0) -> Samples:
    """One scrape of ``url``/metrics, parsed by prometheus_client: ``{(name, labels): value}``."""
    r = httpx.get(f"{url}/metrics", timeout=timeout)
    r.raise_for_status()
    out: Samples = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def exporter_url(lab) -> str:
    st = lab.current_state().get("exporter") or {}
    assert st.get("url"), "the lab has no exporter: run `python scripts/lab.py up`"
    return st["url"]


@pytest.fixture
def prometheus_url(lab) -> str:
    st = lab.current_state().get("prometheus") or {}
    assert st.get("url"), "the lab has no Prometheus: run `python scripts/lab.py up`"
    return st["url"]


def prom_value(prom: str, query: str) -> float | None:
    r = httpx.get(f"{prom}/api/v1/query", params={"query": query}, timeout=10).json()
    assert r["status"] == "success", r
    res = r["data"]["result"]
    return float(res[0]["value"][1]) if res else None


def hold_flags(url: str) -> dict[str, Any]:
    s = scrape(url)
    return {k: value(s, k) for k in ("seat_hold_active", "seat_hold_lease_armed",
                                     "seat_hold_without_lease", "seat_silence_active")}


def test_scrape_matches_the_node_at_rest(lab, node, exporter_url, exclusive) -> None:
    # the exporter serves readings cached by each source's interval (timers and lease: 15 s),
    # so right after an earlier test's hold or restart it may lag the node by one read: the
    # scrape must come to agree with the node within a few intervals
    seen: list[object] = []

    def agrees() -> Samples | None:
        s = scrape(exporter_url)
        want = {("seat_timer_active", (("unit", u),)): 1.0 if a else 0.0
                for u, a in active_timers(node, lab.timers).items()}
        want[("seat_hold_lease_armed", ())] = 1.0 if node_leases(node) else 0.0
        want[("seat_engine_up", ())] = 1.0   # the lab's vLLM answers /health
        off = {k: (s.get(k), v) for k, v in want.items() if s.get(k) != v}
        seen[:] = [off]
        return None if off else s

    try:
        s = wait_until(agrees, 60, interval=1.0, what="the scrape to agree with the node")
    except pytest.fail.Exception:
        pytest.fail(f"the scrape never agreed with the node in 60 s; last (scraped, node): "
                    f"{seen}", pytrace=False)
    (info,) = [k for k in s if k[0] == "seat_container_info"]
    labels = dict(info[1])
    assert labels["role"] == "resident" and labels["name"] == lab.resident_container
    assert labels["image_id"] == lab.engine_image_id
    assert labels["repo_digest"].endswith(lab.engine_repo_digest.split("@")[-1])
    assert value(s, "seat_source_up", source="timers") == 1.0
    assert value(s, "seat_source_up", source="gpus") == 0.0   # no NVML in the lab
    assert value(s, "seat_scrape_duration_seconds") is not None


def seat_silence_end(lab) -> float | None:
    """The latest endsAt of the active silences covering the seat, read from Alertmanager now
    by the console's silences source (other sessions' holds may be active beside ours)."""
    from seat_console.core.profile import load_profile
    from seat_console.core.base import read_once
    from seat_console.sources.silences import SilencesReading, make_source

    r = read_once(make_source(load_profile(str(lab.profile_path))))
    assert isinstance(r, SilencesReading), r
    return max((x.ends_at.timestamp() for x in r.active), default=None)


def test_hold_lease_cancelled_by_hand_and_release(lab, node, env, baseline, exporter_url,
                                                  prometheus_url) -> None:
    assert hold_flags(exporter_url)["seat_hold_active"] == 0.0
    r = cli(lab, env, "hold", "--yes", "--ttl", "5m", "--reason", "exporter lab test",
            "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    h = json.loads(r.stdout)["hold"]
    released = False
    try:
        placed = time.time()
        want = {"seat_hold_active": 1.0, "seat_hold_lease_armed": 1.0,
                "seat_hold_without_lease": 0.0, "seat_silence_active": 1.0}
        wait_until(lambda: hold_flags(exporter_url) == want, 60, what=f"hold metrics {want}")
        s = scrape(exporter_url)
        (lease,) = node_leases(node)
        assert lease.unit == h["lease_unit"]
        assert abs(value(s, "seat_hold_expiry_timestamp_seconds")
                   - lease.next_elapse.timestamp()) < 2
        (sil,) = silences_of(lab, h["hold_id"])
        end = value(s, "seat_silence_end_timestamp_seconds")
        assert end is not None and end >= httpx_time(sil["endsAt"]) - 2
        assert abs(end - seat_silence_end(lab)) < 2
        for unit, active in active_timers(node, lab.timers).items():
            assert value(s, "seat_timer_active", unit=unit) == (1.0 if active else 0.0)
            assert not active

        # the lab's Prometheus sees the hold (it scrapes every 2 s; the exporter reads every
        # 1 s)
        wait_until(lambda: prom_value(prometheus_url,
                                      'seat_hold_active{job="seat-exporter"}') == 1.0,
                   60, what="Prometheus to see seat_hold_active 1")
        seen = time.time() - placed
        print(f"Prometheus saw the hold {seen:.1f} s after `hold` returned")
        seat_instance = lab.vllm_url.split("//", 1)[1]   # the lab's one instance per seat
        # the recording rule follows at its group's next evaluation (an evaluation interval
        # after the raw series, not the same instant)
        wait_until(lambda: prom_value(prometheus_url,
                                      f'seat:held{{instance="{seat_instance}"}}') == 1.0,
                   60, what="Prometheus' recording rule seat:held to say 1")

        # the lease cancelled by hand: timers still stopped, nothing will restore them
        res = node.run(["systemctl", "stop", h["lease_unit"]])
        assert res.ok, res.failure
        wait_until(lambda: hold_flags(exporter_url)["seat_hold_without_lease"] == 1.0, 60,
                   what="seat_hold_without_lease 1")
        f = hold_flags(exporter_url)
        assert f["seat_hold_active"] == 1.0 and f["seat_hold_lease_armed"] == 0.0
        assert value(scrape(exporter_url), "seat_hold_expiry_timestamp_seconds") is None

        rel = cli(lab, env, "release", "--yes")
        assert rel.returncode == 0, rel.stdout + rel.stderr
        released = True
        assert active_timers(node, lab.timers) == baseline
        back = {"seat_hold_active": 0.0, "seat_hold_lease_armed": 0.0,
                "seat_hold_without_lease": 0.0}
        wait_until(lambda: {k: v for k, v in hold_flags(exporter_url).items()
                            if k in back} == back, 60, what=f"hold metrics {back}")
        assert hold_units(node) == []
        # our silence is expired; another session's may still cover the seat
        (sil,) = silences_of(lab, h["hold_id"])
        assert sil["status"]["state"] == "expired"
        other = seat_silence_end(lab)
        wait_until(lambda: value(scrape(exporter_url), "seat_silence_active")
                   == (0.0 if other is None else 1.0), 60, what="seat_silence_active back")
    finally:
        if not released:   # leave nothing behind: the hold's silence (baseline restores
            cli(lab, env, "release", "--yes")   # the timers and stops the lease)
            for x in silences_of(lab, h["hold_id"]):
                if x["status"]["state"] != "expired":
                    httpx.delete(f"{lab.alertmanager_url}/api/v2/silence/{x['id']}",
                                 timeout=10)


def httpx_time(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_alertmanager_down_is_its_source_down_and_the_scrape_still_answers(
        lab, exporter_url, lab_stop) -> None:
    before = scrape(exporter_url)
    assert value(before, "seat_source_up", source="silences") == 1.0
    with lab_stop("alertmanager"):
        wait_until(lambda: value(scrape(exporter_url), "seat_source_up",
                                 source="silences") == 0.0, 90,
                   what='seat_source_up{source="silences"} 0')
        # the scrape answers (a generous deadline: the machine is loaded), from the cache
        s = scrape(exporter_url, timeout=10)
        assert value(s, "seat_source_up", source="silences") == 0.0
        assert value(s, "seat_source_up", source="timers") == 1.0
        last = value(s, "seat_source_last_good_timestamp_seconds", source="silences")
        assert last is not None and last <= time.time()
        assert value(s, "seat_silence_active") is not None   # the last good value, kept
    wait_until(lambda: value(scrape(exporter_url), "seat_source_up",
                             source="silences") == 1.0, 90,
               what='seat_source_up{source="silences"} 1 again')


def test_the_unit_verifies_with_the_nodes_systemd(lab, node, exclusive) -> None:
    """The unit ``--print-unit`` writes, with ``/bin/true`` standing for the exporter (the node
    has no seat-console), passes ``systemd-analyze verify`` of the node's real systemd 252:
    every hardening option is one systemd knows. The file is removed afterwards."""
    from pathlib import Path

    from seat_console.exporter.unit import render_unit

    text = render_unit(["/bin/true", "exporter", "--listen", "127.0.0.1:9469"], user=None,
                       state_dir=Path("/var/lib/seat-console"), data_dir=Path("/var/lib/sc"),
                       docker_group=False)
    path = "/tmp/seat-console-exporter.service"
    put = node.run(["tee", path], stdin=text.encode())
    assert put.ok, put.failure
    try:
        r = node.run(["systemd-analyze", "verify", path], timeout_s=60)
        out = r.stdout + r.stderr
        assert r.ok, out
        assert "Unknown key" not in out and "Unknown lvalue" not in out, out
    finally:
        node.run(["rm", "-f", path])


def test_the_one_node_read_matches_the_node_with_and_without_a_lease(lab, node, baseline,
                                                                      monkeypatch) -> None:
    """The exporter's node read (one ``systemctl show`` of the profile's timers and the lease
    pattern, :func:`~seat_console.exporter.readers.make_node`) against the real systemd 252:
    at rest it says what ``read_timers`` and ``node_leases`` say, with ONE command; with a
    lease armed by hand (a transient ``seat-hold-…-lease`` timer that runs ``/bin/true``) it
    is armed with the next elapse ``list-timers`` gives; stopped, it is gone."""
    import uuid

    from seat_console.core.profile import load_profile
    from seat_console.exporter.model import LeaseValue, TimerFact
    from seat_console.exporter.readers import make_node

    import seat_console.node.transport as tmod

    calls: list[list[str]] = []
    real = tmod.make_transport

    def counting(loaded):  # noqa: ANN001, ANN202
        tr = real(loaded)
        run = tr.run
        tr.run = lambda argv, **kw: (calls.append(list(argv)), run(argv, **kw))[1]
        return tr

    monkeypatch.setattr(tmod, "make_transport", counting)
    read, close = make_node(load_profile(str(lab.profile_path)))
    try:
        v = read()
        want = tuple(TimerFact(u, True, a) for u, a in active_timers(node, lab.timers).items())
        assert v == {"timers": want, "lease": LeaseValue(())}
        assert [c[:2] for c in calls] == [["systemctl", "show"]]   # one command at rest
        name = f"seat-hold-exptest{uuid.uuid4().hex[:8]}-lease"
        res = node.run(["systemd-run", "--on-active=600s", f"--unit={name}",
                        "--description=exporter lab test lease", "/bin/true"])
        assert res.ok, res.failure
        try:
            (lease,) = node_leases(node)
            assert lease.unit == f"{name}.timer"
            calls.clear()
            v = read()
            assert v["timers"] == want
            assert [c[1] for c in calls] == ["show", "list-timers"]   # + the elapse, armed
            (elapse,) = v["lease"].elapses
            # list-timers turns a monotonic elapse into wall time when asked: µs apart
            assert abs(elapse - lease.next_elapse.timestamp()) < 2
        finally:
            assert node.run(["systemctl", "stop", f"{name}.timer"]).ok
        assert read()["lease"] == LeaseValue(())
    finally:
        close()
