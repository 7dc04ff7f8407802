# Overtime — see README.md. Every target that needs packages runs `deps` first, so a fresh
# Debian 12 machine needs nothing by hand.
#
# New here? `make check` is the fast lane: unit tests (`go test -short`), gofmt and vet in
# under two minutes, without root and without the Debian packages; tests that need real
# servers say so and skip. `make test` is the complete run (root, packages, real servers).
SHELL := /bin/bash
GO    ?= go
BIN   := bin/overtime
AGENT := bin/overtime-agent
DEV   := bin/overtime-dev
PKGS  := ./...
# Version and commit for `overtime version` and the agent's heartbeats (and, made
# Debian-valid by scripts/deb-version.sh, the packages' version).
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all deps build devtools deb images check test unit lint fuzz demo demo-stop bench clean

all: build

deps:
	@scripts/deps.sh

# Static: overtime runs on the boot server and admins' machines, overtime-agent on
# desktops whose root may not carry the build host's C library.
build: deps
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/overtime
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(AGENT) ./cmd/overtime-agent

# The development tools (a throwaway slapd, a port forwarded into a network namespace)
# for the demo: a binary of their own, so that overtime links none of them. No package
# carries it (packaging/debian builds overtime and overtime-agent only).
devtools: deps
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(DEV) ./cmd/overtime-dev

# Debian packages overtime, overtime-agent, overtime-initramfs, overtime-slurm in bin/deb/ (docs/packaging.md):
# dpkg-buildpackage on a tree assembled from packaging/debian, with the same -ldflags.
deb: deps
	scripts/deb.sh "$(VERSION)" "$(COMMIT)"

# Images from images/recipes (docs/images.md), built with the .debs of `make deb` into
# bin/images/RECIPE (vmlinuz, initrd.img, root.squashfs, manifest.json, SHA256SUMS),
# cached by recipe and package hash in $(OVERTIME_CACHE)/images (default
# /var/cache/overtime). Needs root. FLAVOUR=desktop builds the graphical desktop too.
FLAVOUR ?= desktop-minimal compute-guest
images: deb
	@for r in $(FLAVOUR); do images/build.sh $$r bin/images/$$r || exit 1; done

# Fast lane: no deps (no root, no packages), only Go. -short skips what needs servers.
check: lint
	$(GO) test -short -count=1 $(PKGS)

# Unit tests and integration tests against real servers (slapd, dnsmasq, slurmctld,
# nfs-ganesha), plus static checks. -p 2: these machines have 2 cores. -timeout 75m: the
# test/ package boots real images end to end (test/desktop_test.go) after building them,
# about 30 minutes on a fresh 2-core machine; the bound is a hang's, below CI's 90.
# scheduler-plugin's check: the C tests, the plugin's exports and the binaries' hardening,
# then the C tests again under ASan/UBSan.
test: deps lint
	$(MAKE) -C scheduler-plugin check
	$(GO) test -count=1 -p 2 -timeout 75m $(PKGS)

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null; git ls-files -o --exclude-standard '*.go' 2>/dev/null)); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

# Longer fuzzing runs than the seed corpus `make test` replays.
FUZZTIME ?= 60s
fuzz: deps
	$(GO) test -run='^$$' -fuzz=FuzzParseRule -fuzztime=$(FUZZTIME) ./sitemgmt/schedule
	$(GO) test -run='^$$' -fuzz=FuzzEngine -fuzztime=$(FUZZTIME) ./sitemgmt/schedule

demo: build devtools
	@scripts/demo.sh start

demo-stop:
	@scripts/demo.sh stop

bench: build
	@scripts/bench.sh

clean:
	rm -rf bin
