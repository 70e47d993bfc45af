# gpuheal front door. Every target works on a fresh Debian 12 machine by itself.
#   make drill  the main job: setup + build + a local control plane + the self-healing drill
#               (DRILL_ARGS="--scenario pdb --repeat 5 ..." for more; docs/drill.md)
#   make run    the standalone agent on this host's kernel log
#   make install  gpuheal and the kubectl plugin kubectl-gpuheal into $(PREFIX)/bin
#   make test   setup + build (incl. the test control plane, cached) + the format check + every test tier

SHELL := /bin/bash
BUILD := build
JOBS ?= $(shell nproc)
STATE_DIR ?= $(HOME)/.cache/gpuheal/state

PREFIX ?= /usr/local

.PHONY: install setup build test integration e2e image deploy-manifests drill run golden asan tsan fuzz bench clean

setup:
	@bash scripts/setup.sh

build: setup
	@cmake --preset default >/dev/null
	@cmake --build --preset default -j $(JOBS)

test: build
	@bash scripts/check-format.sh
	@bash scripts/run-tests.sh $(BUILD)

# The binary and kubectl-gpuheal (the same binary as a kubectl plugin) into $(PREFIX)/bin.
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# Only the integration tier (a real control plane built from Go modules, cached in ~/.cache/gpuheal).
integration: build
	@LABELS=integration bash scripts/run-tests.sh $(BUILD)

# Only the end-to-end tier on a real node (kubelet + containerd on this machine; needs root).
e2e: build
	@LABELS=realnode bash scripts/run-tests.sh $(BUILD)

# The OCI images build/image/gpuheal.tar (gpuheal:dev) and build/image/pause.tar, from this build.
image: build
	@bash scripts/build-image.sh $(BUILD)

# Renders deploy/kubernetes/ and deploy/crds/ from the Helm chart (deploy/helm/gpuheal).
deploy-manifests:
	@bash scripts/gen-deploy.sh

drill: build
	@if [[ "$(DRILL_ARGS)" == *--real-node* ]]; then bash scripts/build-image.sh $(BUILD); fi
	$(BUILD)/gpuheal drill $(DRILL_ARGS)

run: build
	$(BUILD)/gpuheal agent --standalone --state-dir $(STATE_DIR)

# Regenerates the golden contract files and the generated docs; review the diff before committing.
golden: build
	@bash scripts/gen-golden.sh $(BUILD)/gpuheal

asan: setup
	@cmake --preset asan >/dev/null && cmake --build --preset asan -j $(JOBS)
	@bash scripts/run-tests.sh build-asan

tsan: setup
	@cmake --preset tsan >/dev/null && cmake --build --preset tsan -j $(JOBS)
	@bash scripts/run-tests.sh build-tsan

# Builds the libFuzzer targets with clang and fuzzes each for FUZZ_SECONDS (default 60).
fuzz:
	@bash scripts/setup.sh fuzz
	@cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j $(JOBS)
	@bash scripts/fuzz.sh build-fuzz $${FUZZ_SECONDS:-60}

bench: build
	@bash scripts/bench.sh $(BUILD)

clean:
	rm -rf build build-asan build-tsan build-fuzz
