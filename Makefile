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

.PHONY: bench demo test test-rust test-python test-django test-ruby test-activesupport test-typescript test-go test-elixir \
	test-tour conformance lint-rust build-debug venv services \
	ruby-packages rails-tests fuzz clean

# Servers the store tests start on loopback (never as system services): binary -> Debian package.
SERVICE_PACKAGES := memcached:memcached redis-server:redis-server redis-cli:redis-tools memcslap:libmemcached-tools \
	/usr/lib/postgresql/15/bin/postgres:postgresql sqlite3:sqlite3 runuser:util-linux

# The Ruby client's runtime and test dependencies: Debian's packages only (the RubyGems registry is not reachable).
# Rails comes as its parts (ruby-railties, ruby-actionpack): Debian 12's `rails` package does not install here.
RUBY_PACKAGES := ruby rake ruby-msgpack ruby-activesupport ruby-redis ruby-sqlite3 ruby-pg ruby-minitest rubocop \
	ruby-railties ruby-actionpack ruby-rack ruby-webrick ruby-dalli ruby-connection-pool ruby-ffi \
	liblz4-1 libzstd1 libsnappy1v5 libbrotli1

# Where test downloads go (framework suites from PyPI and Debian's source packages): the user's cache directory,
# never the repository. LARDER_CACHE_DIR overrides it.
CACHE_DIR := $(or $(LARDER_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/larder)

demo:
	cargo build --release -p larder-cli
	./target/release/larder demo

test: services lint-rust test-rust test-python test-django test-ruby test-activesupport test-typescript test-go test-elixir \
	conformance test-tour

# Installs (apt-get, only what is missing) the servers the tests start themselves through larder-testkit.
services:
	@missing=""; for pair in $(SERVICE_PACKAGES); do \
		binary=$${pair%%:*}; package=$${pair##*:}; \
		command -v $$binary >/dev/null 2>&1 || [ -x "$$binary" ] || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi

# Installs the Debian packages of RUBY_PACKAGES that are missing.
ruby-packages:
	@missing=""; for package in $(RUBY_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi

lint-rust:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

test-rust:
	cargo test --workspace --locked

build-debug:
	cargo build -p larder-cli -p larder-testkit -p larder-conformance --bins --locked

$(VENV_STAMP): clients/python/requirements-dev.txt clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r clients/python/requirements-dev.txt
	$(VENV)/bin/pip install --quiet --no-deps -e clients/python
	touch $@

venv: $(VENV_STAMP)

# The Python suite also starts Ruby (values crossing between the two clients), hence ruby-packages.
test-python: $(VENV_STAMP) build-debug services ruby-packages
	cd clients/python && ../../$(VENV)/bin/ruff check . && ../../$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check spec bench
	cd clients/python && ../../$(VENV)/bin/mypy
	cd clients/python && LARDER_BIN=$(LARDER_DEBUG) LARDER_HOSTILE=$(LARDER_HOSTILE) ../../$(VENV)/bin/pytest -q

# Django's own cache backend tests on larder.django.LarderCache (the current LTS and the newest release), from sdists
# that clients/python/django_tests/run.py downloads from PyPI into CACHE_DIR.
test-django: $(VENV_STAMP) services
	LARDER_DJANGO_WORK="$(CACHE_DIR)/django-tests" $(VENV)/bin/python clients/python/django_tests/run.py

# The Ruby suite also runs Python (.venv) to read what Ruby wrote.
test-ruby: ruby-packages services build-debug $(VENV_STAMP)
	cd clients/ruby && LARDER_HOSTILE=$(LARDER_HOSTILE) rake test && rubocop

# The TypeScript, Go and Elixir clients: each one's test.sh installs what it needs (npm ci from the lockfile, Go
# modules, Debian's Elixir) into CACHE_DIR or from Debian's packages, and runs its lint and tests. Their
# cross-language tests read and write entries with the Rust binary, Python (.venv) and Ruby.
CLIENT_TEST_ENV = CACHE_DIR="$(CACHE_DIR)" LARDER_BIN=$(LARDER_DEBUG) LARDER_HOSTILE=$(LARDER_HOSTILE)

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
	cd clients/ruby && RAILS_AS_TESTS=$$(test/activesupport/fetch_rails_tests.sh "$(CACHE_DIR)") rake activesupport

# Every language against every file of spec/vectors, as one matrix (spec/conformance.py; each language's runner is
# described in spec/vectors/README.md). The TypeScript, Go and Elixir runners are built by their test targets.
conformance: build-debug $(VENV_STAMP) ruby-packages test-typescript test-go test-elixir
	$(PYTHON) spec/conformance.py
	$(PYTHON) spec/storage_differential.py

# The README's quick tour, run as written in a fresh shell (docs/tour_test.py): it builds the release binary itself.
test-tour:
	$(PYTHON) docs/tour_test.py

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
