# CredentialVault — every target installs what it needs on a fresh Debian 12 machine.
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

# Debian packages the build needs: SQLite and libsodium headers, pkg-config to find them, and
# tpm2-tss's headers for the TPM keeper (its libraries are loaded with dlopen when a TPM slot is
# used: the binary links none of them, and a machine without them runs it as before).
APT_PACKAGES := libsqlite3-dev libsodium-dev pkg-config libtss2-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Under `sudo make install`, the builds run as the user who ran sudo, so the source tree gets no
# root-owned build products; only the installing (and apt-get) runs as root.
AS_USER := $(if $(and $(SUDO_USER),$(filter-out root,$(SUDO_USER)),$(filter 0,$(shell id -u))),sudo -u $(SUDO_USER) env PATH="$(PATH)" HOME="$(shell getent passwd $(SUDO_USER) | cut -d: -f6)",)

.PHONY: deps test-deps release-deps build release test interop demo example lint format docs bench bench-profile stress stress-tests fuzz sanitize fixtures man install uninstall clean

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@command -v swift >/dev/null || { echo "swift not found: install Swift 6.1+ (expected at /opt/swift/usr/bin)"; exit 1; }

build: deps
	swift build

# The `vault` to install: the Swift runtime and Foundation linked in, so no start loads and
# relocates them (`vault token` runs before every API call of a script). It sends HTTP through
# SwiftNIO and does not link FoundationNetworking, so libcurl is needed neither to build nor to
# run it; running it needs libsqlite3-0 and libsodium23.
# `vault-lean` is the front installed as `vault`: it serves `vault token` from a running agent
# with the standard library alone and hands everything else to the full command, installed
# beside it as `vault-full` (see `make install`).
release-deps: deps

release: release-deps
	$(AS_USER) swift build -c release --product vault --static-swift-stdlib
	$(AS_USER) swift build -c release --product vault-lean --static-swift-stdlib

# The whole suite in one test process: the session layer runs every vault call (SQLite,
# fsync, busy waits) on NIO's blocking-I/O threads, so nothing starves the cooperative pool
# the loopback servers and the tests share.
# The agent's other-uid test connects as `nobody` through setpriv (util-linux) with python3;
# the credential helper test has git drive `vault git-credential`; the DOT suite needs a venv;
# unlock on demand runs the real pinentry-tty under `script` (bsdutils); the systemd keeper seals
# with the real systemd-creds (systemd; no systemd running is needed for it), and a credential
# with a read ACL as systemd gives another user's service (acl's setfacl); the TPM keeper seals
# to a software TPM (swtpm, reached through tpm2-tss's swtpm TCTI) whose PCRs and lockout
# settings the tests change with tpm2-tools; `exec --keep-fresh`'s children are shell scripts
# that read their tokens with curl, as its documented examples do.
TEST_PACKAGES := python3 python3-venv util-linux git passwd pinentry-tty systemd acl swtpm libtss2-tcti-swtpm0 tpm2-tools curl
# The desktop keeper's tests run a private session bus and gnome-keyring-daemon; `vault` loads
# libsecret itself when it uses the keyring; the tests read and plant items with secret-tool.
# Without recommends: no PAM module or desktop parts.
KEYRING_PACKAGES := dbus-daemon gnome-keyring libsecret-1-0 libsecret-tools
test-deps: deps
	@missing=""; for p in $(TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@missing=""; for p in $(KEYRING_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# Real-time bounds in the tests (a request to a loopback server) are written for a quiet machine;
# the whole suite runs its suites side by side with dozens of child processes on 2 cores, where a
# 10 s bound was seen to run out (see TestTimeScale). Only bounds scale, never an outcome.
TEST_TIME_SCALE ?= 3
# How many tests run at once. Unbounded, swift-testing starts every test of the run together,
# and each live development gateway (FlyingFox's epoll pool) holds a Dispatch thread while it
# listens: past ~250 gateways alive at once libdispatch had no thread left (its limit is 255),
# URLSession and child-process waits stalled, and the run took minutes and failed. 48 keeps both
# cores busy and the thread count far from the limit.
TEST_WIDTH ?= 48
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH = $(TEST_WIDTH)
test: test-deps
	swift build --build-tests
	TEST_TIME_SCALE=$(TEST_TIME_SCALE) swift test --skip-build
	$(MAKE) interop

# The conformance suites against software nobody here wrote, on loopback: django-oauth-toolkit
# from PyPI (versions pinned in Interop/dot/requirements.txt, in a venv under ~/.cache) with a
# scripted browser: browser and device sign-in, refresh, reuse detection, step-up, revocation on
# remove, end and move, and client credentials (Interop/dot/README.md); then the vault's client
# accounts against an Authlib authorization server from PyPI (pinned in
# Interop/authlib/requirements.txt): client_secret_basic, client_secret_post, private_key_jwt with
# imported and generated keys, key rollover, tokens obtained again, revocation on remove
# (Interop/authlib/README.md); then the git and docker credential helpers as real git 2.39 (clone
# and push through `git http-backend`) and the docker SDK for Python run them, with tokens from
# the same DOT provider (Interop/helpers/README.md).
interop: deps
	swift build --product vault
	Interop/dot/run.sh .build/debug/vault
	Interop/authlib/run.sh .build/debug/vault
	Interop/helpers/run.sh .build/debug/vault

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

# swift-format (in the toolchain) with .swift-format: 4-space indents, 160 columns, and in
# Sources/ no force unwrap and no try! (Tests/.swift-format allows them). `make format` rewrites.
LINT_PATHS := Package.swift Sources Tests Plugins Fuzz Benchmarks/Package.swift Benchmarks/Sources \
	Examples/ClientTool/Package.swift Examples/ClientTool/Sources
lint:
	swift format lint --strict --recursive --parallel $(LINT_PATHS)
	@# Time is injected (a WallClock, a Clock): Date() only in WallClock.system and in
	@# OAuthClient's default (VaultOAuth does not see WallClock); DevGateway is a test server.
	@if grep -rn --include='*.swift' 'Date()' Sources | grep -v '^Sources/DevGateway/' | grep -v '///' \
		| grep -v '^Sources/VaultStore/WallClock.swift:.*static let system' \
		| grep -v '^Sources/VaultOAuth/OAuthClient.swift:.*now: @escaping'; then \
		echo "Date() outside the injected wall clock (above)"; exit 1; fi
	@# The library says what happened; the command says what to run (CommandFailure's hints).
	@if grep -rnE --include='*.swift' '"[^"]*`vault [a-z]' Sources | grep -vE '^Sources/(vault|CredentialVaultDemo|DevGateway)/' \
		| grep -vE '^[^:]+:[0-9]+:\s*//'; then echo "a library message names a vault command (above)"; exit 1; fi

format:
	swift format format --in-place --recursive --parallel $(LINT_PATHS)

# DocC documentation of every library module (swift-docc-plugin; catalogs in
# Sources/<Module>/<Module>.docc): .build/docs/<Module>, each a static site to serve at /<Module>/
# (e.g. `python3 -m http.server -d .build/docs`, then /VaultSession/documentation/vaultsession/).
# One module at a time: the machine is shared, and docc's warnings stay readable.
DOC_MODULES := VaultCrypto VaultStore OAuthWire VaultOAuth VaultSession AgentWire VaultAgent VaultURLSession DevGateway
DOCS_DIR := .build/docs
docs: deps
	@mkdir -p $(DOCS_DIR)
	for module in $(DOC_MODULES); do \
		swift package --allow-writing-to-directory $(DOCS_DIR) \
			generate-documentation --target $$module --output-path $(DOCS_DIR)/$$module \
			--transform-for-static-hosting --hosting-base-path $$module || exit 1; \
	done
	@echo "wrote $(foreach m,$(DOC_MODULES),$(DOCS_DIR)/$(m))"

# Examples/ClientTool is a client tool written as a tool author would (its own package, this one a
# path dependency): `example-check` runs it against the development gateway on loopback, signs in
# by device code, calls the gateway's protected API, recovers a 401 with one refresh.
example: deps
	swift build --package-path Examples/ClientTool
	Examples/ClientTool/.build/debug/example-check

# Benchmarks/ is its own package (own .build), so `make test` never builds it. Release builds
# of the `vault` command and the harness, then every figure against its same-run baseline:
# one table on standard output, the same figures in .bench/results.json (see BENCHMARKS.md).
# Every scenario runs even when one fails; the run exits non-zero when any scenario failed or a
# figure could not be measured (a missed target is printed, not a failure).
# BENCH_ROWS: the largest notification history (1k, a tenth, and it). 100k keeps the run near
# 5 minutes; BENCH_ROWS=1000000 is the issue's full size and spends ~20 min generating it.
# BENCH_QUICK=1: every scenario at small counts on debug builds (what CI runs): it proves each
# scenario runs, not the ratios. Without it, and with valgrind installed, the notification page's
# instruction ratio follows the table (scripts/page-instructions.sh, as `make bench-profile`).
BENCH_ROWS ?= 100000
BENCH_CONFIG := $(if $(BENCH_QUICK),debug,release)
BENCH_VAULT_BUILD := $(if $(BENCH_QUICK),swift build --product vault && swift build --product vault-lean,$(MAKE) release)
BENCH_FLAGS := $(if $(BENCH_QUICK),--quick,--rows $(BENCH_ROWS))
bench: release-deps
	@command -v sqlite3 >/dev/null && [ -x /usr/bin/time ] || { \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sqlite3 time; }
	$(BENCH_VAULT_BUILD)
	swift build -c $(BENCH_CONFIG) --package-path Benchmarks
	@mkdir -p .bench
	set -o pipefail; Benchmarks/.build/$(BENCH_CONFIG)/VaultBench --vault-binary .build/$(BENCH_CONFIG)/vault $(BENCH_FLAGS) \
		--out .bench/results.json | tee .bench/table.txt
	@# The notification page's target in instructions (~40 s under callgrind; not in quick mode).
	@if [ -z "$(BENCH_QUICK)" ]; then \
		if command -v valgrind >/dev/null; then echo; set -o pipefail; scripts/page-instructions.sh | tee -a .bench/table.txt; \
		else echo "(no valgrind: the notification page's instruction ratio is not measured; make bench-profile installs it)"; fi; \
	fi

# Instructions of one notification page of 50 (first of 1,000), the vault's against its baseline
# (plaintext keyset page + 150 decrypts + row MACs, issue 32 item 3), counted by callgrind:
# repeatable on a busy machine, unlike the time ratio `make bench` prints. Needs valgrind.
bench-profile: release-deps
	@command -v valgrind >/dev/null || { \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; }
	swift build -c release --package-path Benchmarks
	scripts/page-instructions.sh $(or $(PAGES),50)

# The reliability suite (issue 7) at large counts: STRESS_SCALE=full, or quick with STRESS_QUICK=1
# (every case at small counts, under five minutes). Each case appends its counts to
# .stress/results.json; the table below is printed from that file.
STRESS_SCALE := $(if $(STRESS_QUICK),quick,full)
# Issue 7's loops at large counts (STRESS_QUICK=1: small counts, short fuzzing), then fuzzing.
FUZZ_SECONDS := $(if $(STRESS_QUICK),10,600)
stress: stress-tests
	$(MAKE) fuzz STRESS_RESULTS=$(CURDIR)/.stress/results.json
	@echo; echo "== make stress ($(STRESS_SCALE)), every case: .stress/results.json"; \
	awk -F'\t' 'BEGIN { printf "%-60s %10s %10s %6s %7s\n", "case", "tried", "passed", "lost", "leaked" } \
		{ printf "%-60s %10s %10s %6s %7s\n", $$1, $$2, $$3, $$4, $$5 }' .stress/results.tsv

# Issue 7 case 16: the whole suite under ThreadSanitizer, then AddressSanitizer (with leak
# checks), in the two steps of `test`; fails on any failing test or any sanitizer report from
# any process (test runner, SessionProbe and vault children). See scripts/sanitize.sh.
sanitize: deps
	scripts/sanitize.sh

fuzz: deps
	for target in SealedBlob TokenResponse Notification AgentFrame; do Fuzz/run.sh $$target $(FUZZ_SECONDS) || exit 1; done

stress-tests: deps
	@rm -rf .stress && mkdir -p .stress && echo "[]" > .stress/results.json && : > .stress/results.tsv
	swift build --build-tests
	STRESS_SCALE=$(STRESS_SCALE) STRESS_RESULTS=$(CURDIR)/.stress/results.json \
		swift test --skip-build --filter VaultReliabilityTests 2>&1 | tee .stress/log.txt; \
		status=$${PIPESTATUS[0]}; \
		echo; echo "== make stress ($(STRESS_SCALE)): .stress/results.json"; \
		awk -F'\t' 'BEGIN { printf "%-52s %8s %8s %6s %7s\n", "case", "tried", "passed", "lost", "leaked" } \
			{ printf "%-52s %8s %8s %6s %7s\n", $$1, $$2, $$3, $$4, $$5 }' .stress/results.tsv 2>/dev/null; \
		grep -h "p99" .stress/log.txt | grep "process" || true; \
		exit $$status

# Regenerates nothing that has landed: writes the fixture for the CURRENT schema version only.
fixtures: deps
	Tests/Fixtures/make-fixture.sh

# The man page, from the command's own help: swift-argument-parser's generate-manual tool (its
# plugin would build every target of the package) run on a built `vault`, MAN_BINARY: the debug
# one for `make man`, the release one for `make install`. Only that and the tool are built.
MAN_OUT := .build/man
MAN_PAGE := $(MAN_OUT)/vault.1
MAN_BINARY ?= .build/debug/vault
man: deps
	$(if $(filter .build/debug/vault,$(MAN_BINARY)),$(AS_USER) swift build --product vault)
	$(AS_USER) swift build --product generate-manual
	$(AS_USER) mkdir -p $(MAN_OUT)
	$(AS_USER) .build/debug/generate-manual $(MAN_BINARY) --output-directory $(MAN_OUT)
	@test -s $(MAN_PAGE) && echo "wrote $(MAN_PAGE)"

# make install [PREFIX=/usr/local] [DESTDIR=…]: the lean front as `vault`, the full command
# beside it as `vault-full` (the front runs it for everything it does not serve),
# git-credential-vault and docker-credential-vault (links to the front: git's
# `credential.helper=vault` and docker's `"credsStore": "vault"` run them), its man page, its bash, zsh and fish completions where those
# shells look, and the agent's systemd user unit running that binary; make uninstall removes
# exactly those.
PREFIX ?= /usr/local
BIN_DIR := $(DESTDIR)$(PREFIX)/bin
MAN_DIR := $(DESTDIR)$(PREFIX)/share/man/man1
BASH_DIR := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSH_DIR := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISH_DIR := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
UNIT_DIR := $(DESTDIR)$(PREFIX)/lib/systemd/user
install: release
	$(MAKE) man MAN_BINARY=.build/release/vault
	install -d $(BIN_DIR) $(MAN_DIR) $(BASH_DIR) $(ZSH_DIR) $(FISH_DIR) $(UNIT_DIR)
	install -s -m 0755 .build/release/vault-lean $(BIN_DIR)/vault
	install -s -m 0755 .build/release/vault $(BIN_DIR)/vault-full
	ln -sf vault $(BIN_DIR)/git-credential-vault
	ln -sf vault $(BIN_DIR)/docker-credential-vault
	sed 's|@BINDIR@|$(PREFIX)/bin|g' contrib/systemd/vault-agent.service.in > $(UNIT_DIR)/vault-agent.service
	chmod 0644 $(UNIT_DIR)/vault-agent.service
	install -m 0644 $(MAN_PAGE) $(MAN_DIR)/vault.1
	.build/release/vault --generate-completion-script bash > $(BASH_DIR)/vault
	.build/release/vault --generate-completion-script zsh > $(ZSH_DIR)/_vault
	.build/release/vault --generate-completion-script fish > $(FISH_DIR)/vault.fish
	@echo "installed vault into $(BIN_DIR) with its man page and completions"

uninstall:
	rm -f $(BIN_DIR)/vault $(BIN_DIR)/vault-full $(BIN_DIR)/git-credential-vault $(BIN_DIR)/docker-credential-vault $(MAN_DIR)/vault.1 \
		$(BASH_DIR)/vault $(ZSH_DIR)/_vault $(FISH_DIR)/vault.fish $(UNIT_DIR)/vault-agent.service

clean:
	rm -rf .build .demo .bench .stress .sanitize .build-tsan .build-asan
