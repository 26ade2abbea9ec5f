# larder: the two commands (see README.md).
#   make demo   build larder and run its main job on the embedded default
#   make test   install what the tests need and run every test of every language

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
VENV_STAMP := $(VENV)/.installed
LARDER_DEBUG := $(CURDIR)/target/debug/larder
# The hostile memcached/Redis server every language's store suite runs against (crates/testkit).
LARDER_HOSTILE := $(CURDIR)/target/debug/larder-hostile
# The fault proxy every language's outage cases put between a cache and a real server (crates/testkit).
LARDER_FAULTS := $(CURDIR)/target/debug/larder-faults

.PHONY: bench demo test test-soak test-rust test-python test-django test-ruby test-activesupport test-typescript test-go test-elixir \
	test-tour test-install conformance conformance-matrix lint-rust build-debug release-build venv services \
	ruby-packages elixir-packages rails-tests fuzz clean test-lane-native test-lane-clients

# The Debian packages each suite needs are listed once, by group, in setup/debian-packages.txt;
# setup/debian-packages.sh installs them and brings them (and what they depend on) to the version a fresh install
# gets today, so that a machine set up last month tests what a new one would. setup/versions.py prints, at the start
# of each suite, the versions it runs against.
PACKAGES = CACHE_DIR="$(CACHE_DIR)" setup/debian-packages.sh
VERSIONS = $(PYTHON) setup/versions.py

# Where test downloads go (framework suites from PyPI and Debian's source packages): the user's cache directory,
# never the repository. LARDER_CACHE_DIR overrides it.
CACHE_DIR := $(or $(LARDER_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/larder)

demo:
	cargo build --release -p larder-cli
	./target/release/larder demo

# `make test` runs the suites in two lanes side by side, then what needs them all. Most suites spend their time
# waiting on the servers, sockets and processes they start, so one lane left the second core idle for much of a run
# (35 minutes on a fresh two-core machine in one lane; README gives the figure in two). Each lane's lines are prefixed
# with its name; the lanes share only what is made before them (packages, .venv, the debug binaries), and a test
# that fails only because the other lane is busy is a test defect (issue 31). LANES=1 runs the lanes one after the
# other. The release build the tour starts with is made in the second lane, so the tour finds it built.
test: services ruby-packages elixir-packages $(VENV_STAMP) build-debug
	$(MAKE) --no-print-directory -j$(if $(filter 1,$(LANES)),1,2) test-lane-native test-lane-clients PREBUILT=1
	$(MAKE) --no-print-directory conformance-matrix test-tour test-install test-soak

# Rust (lint and tests), Python, Django's suite, Ruby and ActiveSupport's suite, one after another.
test-lane-native:
	$(MAKE) --no-print-directory -j1 lint-rust test-rust test-python test-django test-ruby test-activesupport 2>&1 \
		| sed -u '/-j1 forced in submake/d; s/^/[rust py rb] /'

# TypeScript, Go (which reads TypeScript's build), Elixir, and the release binary of the tour.
test-lane-clients:
	$(MAKE) --no-print-directory -j1 test-typescript test-go test-elixir release-build 2>&1 \
		| sed -u '/-j1 forced in submake/d; s/^/[ts go ex] /'

# The tour's release binary, in make test's second lane. Here the release profile drops its link-time optimisation
# and optimises at level 1, which takes minutes off a fresh machine's run: the tour checks what its commands do, not
# how fast they are (make demo and the benchmarks build the shipped profile). test-tour runs with the same settings,
# so its `cargo build --release` finds the binary built.
TOUR_PROFILE = CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
release-build:
	$(TOUR_PROFILE) cargo build --release -p larder-cli --locked

# The servers the tests start themselves on loopback (never as system services), through larder-testkit.
services:
	@$(PACKAGES) services

ruby-packages:
	@$(PACKAGES) ruby

elixir-packages:
	@$(PACKAGES) elixir

lint-rust:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

test-rust:
	@$(VERSIONS) rust
	cargo test --workspace --locked

# The binaries the suites run. In make test's lanes (PREBUILT=1) they are built already: a second cargo there would
# wait for the other lane's cargo to let go of target/debug.
build-debug:
	$(if $(PREBUILT),@true,cargo build -p larder-cli -p larder-testkit -p larder-conformance --bins --locked)

$(VENV_STAMP): clients/python/requirements-dev.txt clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r clients/python/requirements-dev.txt
	$(VENV)/bin/pip install --quiet --no-deps -e clients/python
	touch $@

venv: $(VENV_STAMP)

# The Python suite also starts Ruby (values crossing between the two clients), hence ruby-packages.
test-python: $(VENV_STAMP) build-debug services ruby-packages
	@$(VERSIONS) python
	cd clients/python && ../../$(VENV)/bin/ruff check . && ../../$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check spec bench
	cd clients/python && ../../$(VENV)/bin/mypy
	cd clients/python && LARDER_BIN=$(LARDER_DEBUG) LARDER_HOSTILE=$(LARDER_HOSTILE) LARDER_FAULTS=$(LARDER_FAULTS) ../../$(VENV)/bin/pytest -q

# Django's own cache backend tests on larder.django.LarderCache (the current LTS and the newest release), from sdists
# that clients/python/django_tests/run.py downloads from PyPI into CACHE_DIR.
test-django: $(VENV_STAMP) services
	@$(VERSIONS) django
	LARDER_DJANGO_WORK="$(CACHE_DIR)/django-tests" $(VENV)/bin/python clients/python/django_tests/run.py

# The Ruby suite also runs Python (.venv) to read what Ruby wrote.
test-ruby: ruby-packages services build-debug $(VENV_STAMP)
	@$(VERSIONS) ruby
	cd clients/ruby && LARDER_HOSTILE=$(LARDER_HOSTILE) LARDER_FAULTS=$(LARDER_FAULTS) rake test && rubocop

# The TypeScript, Go and Elixir clients: each one's test.sh installs what it needs (npm ci from the lockfile, Go
# modules, Debian's Elixir) into CACHE_DIR or from Debian's packages, and runs its lint and tests. Their
# cross-language tests read and write entries with the Rust binary, Python (.venv) and Ruby.
CLIENT_TEST_ENV = CACHE_DIR="$(CACHE_DIR)" LARDER_BIN=$(LARDER_DEBUG) LARDER_HOSTILE=$(LARDER_HOSTILE) LARDER_FAULTS=$(LARDER_FAULTS)

test-typescript: build-debug services ruby-packages $(VENV_STAMP)
	$(CLIENT_TEST_ENV) clients/typescript/test.sh

# Go's interop tests also run the TypeScript client's build (clients/typescript/build), which its suite makes.
test-go: build-debug services ruby-packages $(VENV_STAMP) test-typescript
	$(CLIENT_TEST_ENV) bash clients/go/test.sh

test-elixir: build-debug services ruby-packages $(VENV_STAMP)
	$(CLIENT_TEST_ENV) clients/elixir/test.sh

# ActiveSupport's own tests at the installed version, from Debian's source package of rails (its orig tarball),
# into CACHE_DIR once.
rails-tests: ruby-packages
	@clients/ruby/test/activesupport/fetch_rails_tests.sh "$(CACHE_DIR)" > /dev/null

test-activesupport: rails-tests services
	@$(VERSIONS) ruby
	cd clients/ruby && RAILS_AS_TESTS=$$(test/activesupport/fetch_rails_tests.sh "$(CACHE_DIR)") rake activesupport

# Every language against every file of spec/vectors, as one matrix (spec/conformance.py; each language's runner is
# described in spec/vectors/README.md). The TypeScript, Go and Elixir runners are built by their test targets.
conformance: test-typescript test-go test-elixir conformance-matrix

# The matrix alone, on runners already built (make test builds them in its lanes first). It starts its own
# memcached and redis-server for the attack files (hostile_*.json) and checks they are generated as written.
conformance-matrix: build-debug $(VENV_STAMP) ruby-packages services
	$(PYTHON) spec/vectors/hostile_reference.py --check
	$(PYTHON) spec/conformance.py
	$(PYTHON) spec/storage_differential.py

# The README's quick tour, run as written in a fresh shell (docs/tour_test.py): it builds the release binary itself
# (in make test, release-build has made it by then).
test-tour:
	$(TOUR_PROFILE) $(PYTHON) docs/tour_test.py

# Each client's README "## Install" section and first program, run as written in a fresh folder outside the
# repository (docs/install_test.py; ONLY=ts,go for some). Its downloads go to the caches the suites use (CACHE_DIR).
# Last in `test`: the TypeScript install runs `npm ci` in clients/typescript, which the suites above also use.
# A short soak of the front with an L1 over memcached under mixed load (bench/soak.py; docs/benchmarks.md has the
# 30-minute run): memory within its bounds, no connection left open, latency steady. On the tour's release build.
test-soak: services
	$(TOUR_PROFILE) cargo build --release -p larder-cli --locked
	$(PYTHON) bench/soak.py --seconds 45

test-install: ruby-packages elixir-packages
	LARDER_CACHE_DIR="$(CACHE_DIR)" $(PYTHON) docs/install_test.py $(if $(ONLY),--only $(ONLY))

# Every side-by-side benchmark in a row (bench/all.sh): tables in docs/benchmarks.md's form and SVG charts under
# bench/results/<time>/ (QUICK=1: each one's smoke run; ONLY=peers,stores: some of them). Not part of `make test`.
bench: $(VENV_STAMP) services ruby-packages
	bench/all.sh $(if $(QUICK),--quick) $(if $(ONLY),--only $(ONLY)) --charts docs/bench

# A long coverage-guided fuzzing run of the entry decoder (nightly + cargo-fuzz; not part of `make test`).
# Seeds are the vector entries; the corpus stays out of git.
fuzz:
	mkdir -p fuzz/corpus/decode_entry
	$(PYTHON) -c 'import json; [open("fuzz/corpus/decode_entry/" + c["name"], "wb").write(bytes.fromhex(c["entry_hex"])) for c in json.load(open("spec/vectors/entries.json"))["cases"]]'
	cd fuzz && cargo +nightly fuzz run decode_entry -- -runs=$${RUNS:-1000000} -max_len=4096
	cd fuzz && cargo +nightly fuzz run derive_key -- -runs=$${RUNS:-1000000} -max_len=1024
	cd fuzz && cargo +nightly fuzz run parse_json -- -runs=$${RUNS:-1000000} -max_len=4096

clean:
	cargo clean
	rm -rf $(VENV)
