"""Benchmark harness: tubemq-aio against the official Java client on one real broker.

Entry point: ``python -m benchmarks`` (see :mod:`benchmarks.harness.cli` and
``docs/benchmarks.md``). Modules:

* :mod:`~benchmarks.harness.cli` -- options and ``main``.
* :mod:`~benchmarks.harness.session` -- cluster, topics, interleaved rounds, floor.
* :mod:`~benchmarks.harness.aio_worker` -- our client in its own process (one JSON line out).
* :mod:`~benchmarks.harness.proc` -- running a client process with RSS / broker-CPU sampling.
* :mod:`~benchmarks.harness.stats` -- median and bootstrap interval.
* :mod:`~benchmarks.harness.report` -- ``raw.json``, ``summary.md`` and PNG plots.
* :mod:`~benchmarks.harness.env` -- versions, CPU model, kernel, git revision, pinning.
"""
