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

.PHONY: venv system-deps collection units sanity lint molecule test demo demo-down bench clean

venv: $(STAMP)
$(STAMP): requirements-dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

# The lab's SSH hosts need sshd (Debian's openssh-server); installed only when missing.
system-deps:
	@command -v /usr/sbin/sshd >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client >/dev/null; }

# ansible-test and ansible-playbook need the collection under ansible_collections/<ns>/<name>.
collection:
	@rm -rf $(BUILD) && mkdir -p $(BUILD)
	@git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C $(BUILD)

units: venv
	$(BIN)/python -m pytest -q tests/unit tests/lab

sanity: venv collection
	cd $(BUILD) && git init -q . 2>/dev/null; cd $(BUILD) && git add -A >/dev/null && \
	  $(CURDIR)/$(BIN)/ansible-test sanity --python 3.11 --color no

lint: venv collection
	cd $(BUILD) && $(CURDIR)/$(BIN)/ansible-lint --profile production --offline

molecule: venv system-deps collection
	cd extensions && ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/.build $(CURDIR)/$(BIN)/molecule test --all

test: units sanity lint molecule

demo: venv system-deps collection
	$(BIN)/python tests/lab/demo.py --dir $(LAB_DIR)

demo-down: venv
	PYTHONPATH=tests/lab $(BIN)/python -m gpulab down --dir $(LAB_DIR)

bench: venv system-deps collection
	$(BIN)/python -m pytest -q -s tests/bench

clean:
	rm -rf .build $(VENV) .lab
