# larder: the two commands (see README.md).
#   make demo   build larder and run its main job on the embedded default
#   make test   install what the tests need and run every test of every language

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
VENV_STAMP := $(VENV)/.installed
LARDER_DEBUG := $(CURDIR)/target/debug/larder

.PHONY: demo test test-rust test-python lint-rust build-debug venv services fuzz clean

# Servers the store tests start on loopback (never as system services): binary -> Debian package.
SERVICE_PACKAGES := memcached:memcached redis-server:redis-server redis-cli:redis-tools memcslap:libmemcached-tools \
	/usr/lib/postgresql/15/bin/postgres:postgresql sqlite3:sqlite3 runuser:util-linux

demo:
	cargo build --release -p larder-cli
	./target/release/larder demo

test: services lint-rust test-rust test-python

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

lint-rust:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

test-rust:
	cargo test --workspace --locked

build-debug:
	cargo build -p larder-cli --locked

$(VENV_STAMP): clients/python/requirements-dev.txt clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r clients/python/requirements-dev.txt
	$(VENV)/bin/pip install --quiet --no-deps -e clients/python
	touch $@

venv: $(VENV_STAMP)

test-python: $(VENV_STAMP) build-debug
	cd clients/python && ../../$(VENV)/bin/ruff check . && ../../$(VENV)/bin/ruff format --check .
	cd clients/python && LARDER_BIN=$(LARDER_DEBUG) ../../$(VENV)/bin/pytest -q

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
