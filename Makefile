# CredentialVault — every target installs what it needs on a fresh Debian 12 machine.
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

# Debian packages the build needs: SQLite and libsodium headers, pkg-config to find them.
APT_PACKAGES := libsqlite3-dev libsodium-dev pkg-config
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build test demo bench stress fixtures clean

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@command -v swift >/dev/null || { echo "swift not found: install Swift 6.1+ (expected at /opt/swift/usr/bin)"; exit 1; }

build: deps
	swift build

test: deps
	swift test

# The main job: the whole product on a fresh vault in ./.demo/ against the development
# gateway on loopback, told in plain words; then the vault command on the result.
DEMO_VAULT := .demo/vault.db
demo: deps
	swift build
	.build/debug/CredentialVaultDemo .demo
	@echo; echo "== vault status"
	@VAULT_PASSPHRASE=demo .build/debug/vault status --vault $(DEMO_VAULT)
	@echo; echo "== vault notifications list"
	@VAULT_PASSPHRASE=demo .build/debug/vault notifications list --vault $(DEMO_VAULT)
	@echo; echo "Look further (the demo vault's passphrase is \"demo\"):"
	@echo "  .build/debug/vault accounts list --vault $(DEMO_VAULT)"
	@echo "  .build/debug/vault --help"

bench: deps
	@echo "make bench: not yet — benchmarks arrive with issue 6."

stress: deps
	@echo "make stress: not yet — the reliability suite arrives with issue 7."

# Regenerates nothing that has landed: writes the fixture for the CURRENT schema version only.
fixtures: deps
	Tests/Fixtures/make-fixture.sh

clean:
	rm -rf .build .demo .bench .stress
