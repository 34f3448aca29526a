"""The exporter: the seat as the node and Alertmanager see it, as Prometheus metrics.

``seat-console exporter`` (:mod:`seat_console.exporter.cmd`) serves ``/metrics`` with
``prometheus_client``. Read-only: it never writes to the node, the journal or Alertmanager.

* the sources are the source table's (:mod:`seat_console.snapshot.table`), each read by the
  one poll engine (:mod:`seat_console.snapshot.poll`) in its own daemon thread on its own
  interval; a scrape reads only the engine's state, so a hung source never holds a scrape up
  (the source is reported down, its last good value and time are kept);
* :mod:`~seat_console.exporter.readers` — one reader per exported source;
* :mod:`~seat_console.exporter.model` — the pure step: cached readings → the metric families of
  ``docs/prometheus/metrics.md`` (no I/O; unit-tested with fakes);
* :mod:`~seat_console.exporter.collector` — the ``prometheus_client`` custom collector;
* :mod:`~seat_console.exporter.unit` — the systemd unit ``--print-unit`` prints.

No Textual, no Rich: this is a headless front.
"""
