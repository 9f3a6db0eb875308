# tubemq-aio developer entry points. `make test` builds everything from nothing.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_OUT := tubemq_aio/protocol/pb

.PHONY: help demo-deps gateway-demo-deps venv speedups protos protos-check lint typecheck unit test test-spark-cluster test-versions test-pythons docs docs-dev dist demo spark-example spark-cluster-example cluster-up cluster-down cluster-status system-deps bench bench-quick bench-estimate fuzz gateway-demo bench-gateway gateway-ha-run chaos clean bench-scale

help:
	@echo "make demo   - start a local TubeMQ cluster, produce and consume, print what happened"
	@echo "make test   - install everything, lint, type-check, run unit + integration tests"
	@echo "make test-versions - the server-version smoke test on every older version make test does not cover (1.1.0-incubating)"
	@echo "make test-spark-cluster - the Spark standalone-cluster and Spark Connect tests (CI runs them after make test)"
	@echo "make test-pythons - make unit's tests on Python 3.12 and 3.13, compiled and pure, each in a venv of its own (CI runs it last)"
	@echo "make unit   - the fast tests: no cluster, no Java, no Redis failover, no outside programs (PYTEST_WORKERS=N, default 4)"
	@echo "make soak   - 10 min produce+consume against a local cluster; RSS/fds/tasks must stay flat (MINUTES=N)"
	@echo "make fuzz   - a million fuzz inputs through the frame decoder, envelope and every response parser"
	@echo "make gateway-demo - local cluster + Redis + one HTTP gateway replica; curl produce, fetch, ack"
	@echo "make bench-quick - SDK vs the Java/Go clients, ~10 min; compares with the newest committed run"
	@echo "make bench  - the full matrix (~2 h; ROUNDS=6 for more rounds); make bench-estimate prints its duration"
	@echo "make bench-gateway - HTTP gateway vs the framework floor and the SDK (quick: BENCH_ARGS=--quick)"
	@echo "make bench-scale - client cost against partitions (4..8192), members and topics on FakeCluster, ~10 min (quick: BENCH_ARGS=--quick)"
	@echo "make chaos  - 3 masters + 3 brokers; kill the active master, rolling and all-at-once broker restarts, a frozen broker, a network cut, while clients run (~10 min)"
	@echo "make gateway-ha-run - 3 gateway replicas under load on Redis Sentinel; kill -9 a replica, then the Redis primary (HA_ARGS=--quick, --real-cluster)"
	@echo "make spark-example - local cluster, Spark streaming job: JSON events counted per minute to Parquet"
	@echo "make spark-cluster-example - the same job by spark-submit on a Spark standalone cluster (master + 2 workers), package shipped with --py-files"
	@echo "make docs   - build the documentation site (API reference from the docstrings) into site/"
	@echo "make dist   - build the sdist and the wheel into dist/"

# Debian packages the tests need: Java 17 and Maven run the real TubeMQ servers and build the Java
# interop/benchmark peer; redis-server holds the HTTP gateway's state; jq checks the CLI's JSON output;
# wrk drives the gateway benchmark and curl its demo; nodejs runs a gateway client in another
# language (ids and offsets must survive JavaScript's JSON); gcc and python3-dev build the
# optional compiled accelerator.
# `make demo` needs only the servers' Java and Maven, `make gateway-demo` Redis and curl too; the
# rest is for the tests and benchmarks.
DEMO_PACKAGES := openjdk-17-jdk-headless maven
GATEWAY_DEMO_PACKAGES := $(DEMO_PACKAGES) redis-server curl
SYSTEM_PACKAGES := $(DEMO_PACKAGES) redis-server jq wrk curl nodejs gcc python3-dev chromium chromium-driver
define install_debs
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi
endef
system-deps:
	$(call install_debs,$(SYSTEM_PACKAGES))

demo-deps:
	$(call install_debs,$(DEMO_PACKAGES))

gateway-demo-deps:
	$(call install_debs,$(GATEWAY_DEMO_PACKAGES))

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e . --group dev  # dev tools: PEP 735 group, pip >= 25.1
	touch $(STAMP)

venv: $(STAMP) speedups

# The optional compiled accelerator (Cython, in place); `make test` requires it and also tests
# the pure-Python code it replaces.
speedups: $(STAMP)
	$(PY) -m tubemq_aio._speedups.build

protos: $(STAMP)
	$(PY) -m tubemq_aio.protocol.pb.generate

protos-check: $(STAMP)
	$(PY) -m tubemq_aio.protocol.pb.generate --check

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# FUZZ_INPUTS=N and FUZZ_SEED=S change the run; `make test` runs 10 000 of them (tests/fuzz).
fuzz: $(STAMP)
	$(PY) -m tubemq_aio.testing.fuzz --inputs $(or $(FUZZ_INPUTS),1000000) --seed $(or $(FUZZ_SEED),1)

# MINUTES=N shortens the run; SOAK_RATE=N changes the messages per second (default 200).
soak: system-deps $(STAMP)
	$(PY) tests/soak/soak.py --minutes $(or $(MINUTES),10) --rate $(or $(SOAK_RATE),200)

# Tests run on PYTEST_WORKERS processes (pytest-xdist, `PYTEST_WORKERS=0` runs them in this one).
# Most tests wait on sockets, servers and timeouts rather than on the CPU, so more workers than
# cores pays even on 2 cores. The integration tests form two groups (tests/xdist_groups.py):
# each group runs whole on one worker, which starts that group's real cluster, so a run starts
# two clusters and one Spark session. Both targets print the 20 slowest tests.
PYTEST_WORKERS ?= 4
PYTEST_XDIST := -n $(PYTEST_WORKERS) -p tests.xdist_groups

# The fast tests (budget: 2 minutes on 2 cores): tests/ except tests/integration (the real
# cluster, Java), without the tests marked `failover` (Redis Sentinel and Cluster sets whose
# primaries are killed, gateway replicas) or `system` (a real outside program as a process:
# headless Chromium, Node.js, the CLI, tubemq-gateway, mkdocs). Loopback sockets, FakeCluster and
# a single redis-server are in. `make test` runs them all, and every property test at its full
# example count; here each runs a quarter of its examples (TUBEMQ_AIO_EXAMPLES_SCALE,
# tests/support/examples.py), on UNIT_WORKERS processes, and Python may cache the compiled test
# modules (PYTHONDONTWRITEBYTECODE unset: pytest rewrites every test module in every worker
# otherwise, about 12 CPU-s a worker; tests.support.warm_bytecode first rewrites and caches the
# test modules whose cache is stale in one process, where ten workers did it each, about 4.5
# CPU-s a worker for the whole tree). Each worker spends about 5 CPU-s before its first test
# (collecting every test module: pandas, pyspark and FastAPI are imported by the modules that
# test them); the tests take about 100 CPU-s and wait some 350 s in all on timeouts of their
# own (FakeCluster scenarios, fault windows), which the workers overlap: 8 workers took 7 to
# 12 s less than 6 (two collections more, about 7 CPU-s, against a quarter less waiting per
# worker); with more tests that wait out an RPC timeout, 10 took 109 and 116 s against 117 and
# 125 s for 8 (alternated, nothing else running), and 12 no less (116 s). tests/xdist_groups.py
# spreads each folder's tests over the run,
# so the waiting ones overlap the CPU-bound ones (docs/testing.md, "Where the time goes").
UNIT_MARKERS := not failover and not system
UNIT_WORKERS ?= 10
UNIT_ENV := env -u PYTHONDONTWRITEBYTECODE TUBEMQ_AIO_EXAMPLES_SCALE=0.25
UNIT_ARGS := -q -n $(UNIT_WORKERS) -p tests.xdist_groups --durations=20 tests \
  --ignore=tests/integration -m "$(UNIT_MARKERS)"
unit: $(STAMP) speedups
	$(UNIT_ENV) $(PY) -m tests.support.warm_bytecode
	$(UNIT_ENV) TUBEMQ_AIO_EXPECT_SPEEDUPS=1 $(PY) -m pytest $(UNIT_ARGS)

test: system-deps $(STAMP) speedups protos-check lint typecheck docs-dev
	TUBEMQ_AIO_EXPECT_SPEEDUPS=1 $(PY) -m pytest -q -ra $(PYTEST_XDIST) --durations=20 \
	  --ignore=$(SPARK_CLUSTER_TESTS)

# The server-version matrix (docs/local-cluster.md): `make test` runs the full suite on the default
# server (2.4.0) and the smoke test (produce, both consumers, TLS, authentication) on
# 1.2.0-incubating; this target runs the same smoke test on the other versions LocalCluster can
# run, one cluster each, after `make test` in CI (.ci/run).
OTHER_SERVER_VERSIONS ?= 1.1.0-incubating
test-versions: system-deps $(STAMP) speedups
	TUBEMQ_AIO_SMOKE_VERSIONS=$(OTHER_SERVER_VERSIONS) $(PY) -m pytest -q -ra --durations=5 \
	  tests/integration/test_server_versions.py

# The fast tests on the other Python versions pyproject.toml declares (3.11 is the default
# python3 above): for each of OTHER_PYTHONS a venv of its own (.venv-pyX.Y, git-ignored), the
# package and the dev group installed into it from nothing, the compiled accelerator built for
# that interpreter, then `make unit`'s set twice: on the accelerator, and pure
# (TUBEMQ_AIO_PURE=1). An interpreter that cannot be found fails the target, never skips it:
# pythonX.Y on PATH, else pyenv's newest X.Y.* (PYTHON_X.Y=/path/to/python overrides both).
# Runs after the other targets in CI (.ci/run); see docs/testing.md, "Other Python versions".
OTHER_PYTHONS ?= 3.12 3.13
find_python = $(or $(PYTHON_$(1)),$$($(PYTHON) -m tests.support.find_python $(1)))

.venv-py%/.installed: pyproject.toml
	@interp="$(call find_python,$*)" || exit 1; \
	echo "Python $* is $$interp"; \
	rm -rf .venv-py$*; \
	"$$interp" -m venv .venv-py$*
	.venv-py$*/bin/python -m pip install -q --upgrade pip
	.venv-py$*/bin/python -m pip install -q -e . --group dev
	touch $@

test-pythons: system-deps $(foreach v,$(OTHER_PYTHONS),.venv-py$(v)/.installed)
	@set -e; for v in $(OTHER_PYTHONS); do \
	  py=.venv-py$$v/bin/python; \
	  $$py -m tubemq_aio._speedups.build; \
	  echo "== Python $$v: make unit's tests on the compiled accelerator"; \
	  $(UNIT_ENV) $$py -m tests.support.warm_bytecode; \
	  $(UNIT_ENV) TUBEMQ_AIO_EXPECT_SPEEDUPS=1 $$py -m pytest $(UNIT_ARGS); \
	  echo "== Python $$v: make unit's tests on the pure-Python code (TUBEMQ_AIO_PURE=1)"; \
	  $(UNIT_ENV) TUBEMQ_AIO_PURE=1 $$py -m pytest $(UNIT_ARGS); \
	done

# The Spark standalone-cluster and Spark Connect tests: a Spark master, two workers,
# a Connect server and spark-submit jobs beside a real TubeMQ cluster, about 6 minutes on an idle
# machine. They run on their own, after `make test` in CI (.ci/run), so that the JVMs they start
# do not compete for the 2 cores with the two test clusters of `make test`.
SPARK_CLUSTER_TESTS := tests/integration/test_spark_cluster.py
test-spark-cluster: system-deps $(STAMP) speedups
	TUBEMQ_AIO_EXPECT_SPEEDUPS=1 $(PY) -m pytest -q -ra --durations=5 $(SPARK_CLUSTER_TESTS)

# --strict: a broken link, a missing page or a docstring the reference cannot render fails the build.
# `make docs` installs only the site tools (the `docs` dependency group, pip >= 25.1) into a venv
# of their own: the API reference is read from the source, so neither the package's dependencies
# nor the development environment are needed. `make test` builds with the dev venv (docs-dev),
# which includes that group.
DOCS_VENV ?= .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed
$(DOCS_STAMP): pyproject.toml
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install -q --group docs
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --site-dir site

docs-dev: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist

demo: demo-deps $(STAMP)
	$(PY) -m tubemq_aio.demo

gateway-demo: gateway-demo-deps $(STAMP)
	$(PY) -m tubemq_aio.gateway.demo

bench-gateway: system-deps $(STAMP)
	$(PY) -m benchmarks.gateway $(BENCH_ARGS)

# A fresh client process per cell against a FakeCluster in its own process: consumer CPU per
# message, positions(), memory, tasks and sockets over 4..8192 partitions, an idle consumer,
# client-balanced connect, producer over topics, a group of N members; writes
# benchmarks/results/<date>-<rev>-scale/ (see docs/benchmarks.md, "How cost grows").
bench-scale: $(STAMP) speedups
	$(PY) -m benchmarks.scale $(BENCH_ARGS)

# Load through 3 uvicorn replicas (4 HTTP consumers, 1 producer) while one replica and then the
# Redis primary are SIGKILLed; writes benchmarks/results/<date>-gateway-ha/ (see docs/gateway.md).
gateway-ha-run: system-deps $(STAMP)
	$(PY) -m benchmarks.gateway_ha $(HA_ARGS)

spark-example: system-deps $(STAMP)
	$(PY) examples/spark_pipeline.py

spark-cluster-example: system-deps $(STAMP)
	$(PY) examples/spark_cluster.py

cluster-up: system-deps $(STAMP)
	$(PY) -m tubemq_aio.testing.cluster up

cluster-down: $(STAMP)
	$(PY) -m tubemq_aio.testing.cluster down

cluster-status: $(STAMP)
	$(PY) -m tubemq_aio.testing.cluster status

bench-quick: system-deps $(STAMP)
	$(PY) -m benchmarks --quick

# The full matrix (see docs/benchmarks.md); ROUNDS=6 runs the same cells with more rounds
# (the first is always discarded). The run prints its expected duration first.
bench: system-deps $(STAMP)
	$(PY) -m benchmarks $(if $(ROUNDS),--rounds $(ROUNDS))

bench-estimate: $(STAMP)
	$(PY) -m benchmarks --estimate $(if $(ROUNDS),--rounds $(ROUNDS))

# The chaos run (docs/failures.md): LocalCluster(masters=3, brokers=3) with producers and
# consumers running while the servers fail; per-event figures and the load averages go to
# benchmarks/results/<date>-<commit>-chaos/chaos.json. Bounded (CHAOS_ARGS=--ceiling SECONDS).
chaos: system-deps $(STAMP)
	$(PY) -m benchmarks.chaos $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) $(DOCS_VENV) .venv-py* .mypy_cache .ruff_cache .pytest_cache .hypothesis site dist
