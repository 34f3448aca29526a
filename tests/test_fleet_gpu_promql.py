"""The fleet's ``gpu`` query (three series a seat, aggregated in PromQL) evaluated by the real
`promtool test rules` over per-card dcgm-exporter series: complete seats, a card without FREE,
a card without USED, RESERVED counted when present, a card exported twice, a seat without DCGM
(no series)."""

from __future__ import annotations

import json

from test_prometheus_rules import run

from seat_console.fleet.rows import gpu_query

U, F, R = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED"
CARDS = {   # instance → cards → family → MiB
    "a": [{U: 1000, F: 24}, {U: 1000, F: 24}],
    "b": [{U: 1000}],                                   # no FREE: used known, total unknown
    "c": [{U: 10, F: 90, R: 5}, {U: 20, F: 80}],        # RESERVED counted where present
    "d": [{U: 10, F: 90}, {F: 100}],                    # a card without USED: no USED sum
}
WANT = {("a", "cards"): 2, ("a", U): 2000, ("a", F): 48,
        ("b", "cards"): 1, ("b", U): 1000,
        ("c", "cards"): 2, ("c", U): 30, ("c", F): 170, ("c", "reserved"): 5,
        ("d", "cards"): 2, ("d", F): 190,
        ("e", "cards"): 1}                               # one card exported twice: no sums


def test_gpu_query_sums_only_complete_seats(tmp_path):
    series = [{"series": f'{fam}{{instance="{inst}",UUID="GPU-{n}",gpu="{n}"}}',
               "values": f"{v}x5"}
              for inst, cards in CARDS.items() for n, card in enumerate(cards)
              for fam, v in card.items()]
    series += [{"series": f'{U}{{instance="e",UUID="GPU-0",job="{j}"}}', "values": "7x5"}
               for j in ("dcgm-a", "dcgm-b")]
    series.append({"series": 'seat_engine_up{instance="f"}', "values": "1x5"})  # no DCGM
    exp = [{"labels": f'{{instance="{i}", q="{q}"}}' if q in ("cards", "reserved") else
            f'{q}{{instance="{i}"}}', "value": v} for (i, q), v in WANT.items()]
    doc = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "promql_expr_test": [{"expr": gpu_query(), "eval_time": "2m", "exp_samples": exp}]}]}
    f = tmp_path / "gpu.test.yml"
    f.write_text(json.dumps(doc))      # YAML is a superset of JSON
    r = run("test", "rules", f.name, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
