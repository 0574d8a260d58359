# gpufleet.sharing — developer entry points. `make demo` and `make test` are the whole setup.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BUILD := .build/ansible_collections/gpufleet/sharing
LAB_DIR ?= .lab/demo
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.build
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: venv system-deps collection units sanity lint build-check molecule test matrix newest demo demo-down bench clean

venv: $(STAMP)
$(STAMP): requirements-dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

# The lab's SSH hosts need sshd (Debian's openssh-server), the HTML report's browser test Debian's
# chromium, ansible-rulebook (the EDA rulebook test) a Java runtime (default-jre-headless: OpenJDK 17
# on Debian 12); each installed only when missing (one apt-get update at most).
system-deps:
	@missing=""; command -v /usr/sbin/sshd >/dev/null || missing="openssh-server openssh-client"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v java >/dev/null || missing="$$missing default-jre-headless"; \
	[ -z "$$missing" ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }

# ansible-playbook finds the collection through ANSIBLE_COLLECTIONS_PATH=.build (a symlink to this tree).
collection:
	@mkdir -p .build/ansible_collections/gpufleet && ln -sfn ../../.. .build/ansible_collections/gpufleet/sharing

units: venv system-deps collection
	GPUFLEET_REQUIRE_PREREQUISITES=1 $(BIN)/python -m pytest -q --durations=25 tests/unit tests/lab

sanity: venv
	tests/tools/sanity.sh

lint: venv collection
	$(BIN)/ansible-lint --profile production --offline

molecule: venv system-deps collection
	cd extensions && ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/.build $(CURDIR)/$(BIN)/molecule test --all

build-check: venv
	tests/tools/build_check.sh

test: units sanity lint build-check molecule newest

demo: venv system-deps collection
	$(BIN)/python tests/lab/demo.py --dir $(LAB_DIR)

demo-down: venv
	PYTHONPATH=tests/lab $(BIN)/python -m gpulab down --dir $(LAB_DIR)

# The ansible-core version matrix: one leg per version other than the pinned one (README.md,
# "Supported versions"), one after another, each in its own venv (.matrix/) and lab address.
# Not part of `make test`: one leg took about 21 minutes on 2 cores (README.md), five legs ~1h45.
MATRIX_VERSIONS ?= 2.16.19 2.17.14 2.18.19 2.20.10 2.21.5
matrix: system-deps collection
	@for version in $(MATRIX_VERSIONS); do tests/tools/matrix_leg.sh $$version || exit 1; done

# Part of `make test`: the newest ansible-core's leg without its sanity and unit tests (the two costly
# steps; `make matrix` runs them): the in-process equivalence test, the oldest host Python, the demo, a
# second run at changed=0, --check --diff and ansible-doc. A real run is what caught 2.21's break.
NEWEST ?= 2.21.5
newest: system-deps collection
	GPUFLEET_LEG_SKIP="sanity,unit tests" tests/tools/matrix_leg.sh $(NEWEST)

# Benchmarks print tables and JSON (ratios against a baseline measured in the same run).
bench: venv system-deps collection
	@for script in tests/bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf .build $(VENV) .lab .matrix
