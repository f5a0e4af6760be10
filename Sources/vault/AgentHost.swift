import Foundation
import Logging
import VaultAgent
import VaultSession
import VaultStore

#if canImport(Glibc)
    import Glibc
#endif

/// The running agent: the unlocked vault and its session service (or none, locked), the rules
/// that drop the keys, and the answer to every request.
///
/// Keys are dropped (the vault closed, which wipes them) after `lockAfter` without a request,
/// on `lock`, when the session service locks a session (idle or background timeout), and when
/// the vault file is replaced or removed under the agent — it never serves from a stale key.
actor AgentHost {
    let global: GlobalOptions
    let url: URL
    let socket: URL
    let lockAfter: Duration?
    /// What the unlocked agent watches between requests (``GrantWatch``).
    let watch: AgentWatch
    let logger: Logger
    let startedAt: Date
    /// The agent's wall clock (`status` times) and the clock its lock timer sleeps on.
    let wallClock: WallClock
    let clock: any Clock<Duration>
    private var opened: OpenedVault?
    /// The vault file the keys belong to (device and inode when it was opened).
    private var identity: (dev: UInt64, ino: UInt64)?
    private var lastUse: Date?
    private var lockTimer: Task<Void, Never>?
    private var watcher: Task<Void, Never>?
    private var stopRequested: CheckedContinuation<Void, Never>?
    private var stopWanted = false
    /// Why the keys were dropped when it was not an ordinary lock (`key_changed`): told in
    /// `status` and in the refusal of every request until `vault unlock`.
    private var lockReason: String?

    /// Where lock and unlock are told (standard error in the foreground; nowhere detached).
    let report: @Sendable (String) -> Void
    /// What a locked agent asks the passphrase through, or why it cannot.
    let pinentry: Result<Pinentry, Pinentry.Unavailable>
    /// The prompt being shown: every request that meets the locked agent meanwhile waits for
    /// it (one prompt however many ask).
    var prompting: Task<PromptOutcome, Never>?
    /// Wrong passphrases typed at prompts since the last unlock: each next attempt waits longer.
    var wrongInARow = 0
    /// The pinentry being shown, ended if the agent stops meanwhile (never left on a terminal).
    var conversation: PinentryConversation?

    init(
        global: GlobalOptions, socket: URL, lockAfter: Duration?, pinentry: Result<Pinentry, Pinentry.Unavailable> = .failure(.turnedOff),
        watch: AgentWatch = AgentWatch(refreshAhead: [], checkInterval: nil, refreshExpiryWarning: nil), wallClock: WallClock = CommandTime.wall,
        clock: any Clock<Duration> = CommandTime.clock,
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.pinentry = pinentry
        self.report = report
        self.wallClock = wallClock
        self.clock = clock
        self.startedAt = wallClock.now()
        self.global = global
        self.url = global.url
        self.socket = socket
        self.lockAfter = lockAfter
        self.watch = watch
        self.logger = global.logger("credentialvault.agent")
    }

    /// Opens the vault with `credential` (the service started, the lock timer armed); with
    /// `resumingSessions`, also resumes the sessions an idle or background timeout locked (the
    /// agent locks itself when one does, so one `vault unlock` brings both back). Nothing when
    /// it is open already (the credential is then not checked, and no session resumed).
    func unlock(
        resumingSessions: Bool = false, _ choose: @escaping @Sendable (VaultOpeningFacts) throws -> VaultCredential
    ) async throws {
        // Keys another process replaced are dropped first, and the vault opened afresh with the
        // credential given: never the new key kept next to (or chained under) the old one.
        await checkKeysStillCurrent()
        guard opened == nil else { return }
        // Key derivation and SQLite off the cooperative pool, and off this actor's thread.
        let (global, watch, report, logger) = (self.global, self.watch, self.report, self.logger)
        let vault = try await BlockingWork.run {
            try OpenedVault.open(
                global,
                configure: { vault in
                    try watch.configuration(in: vault) { name in
                        logger.warning("--refresh-ahead names no account; left out", metadata: ["account": "\(name)"])
                        report("--refresh-ahead \(Terminal.printable(name)): no such account (removed?); not refreshed ahead")
                    }
                }, credential: choose)
        }
        guard opened == nil else {
            await vault.close()  // another unlock got there first
            return
        }
        // Claimed before the next suspension: a second unlock arriving meanwhile sees it and
        // closes its own vault, so no opened vault (and its keys) is ever left unreferenced.
        opened = vault
        do {
            // Before start(): a session resumed now is not judged locked again on the way.
            if resumingSessions { try await vault.session.unlock(with: vault.credential) }
            try await vault.session.start()
        } catch {
            if opened?.vault === vault.vault { opened = nil }
            await vault.close()
            throw error
        }
        identity = Self.identity(of: url)
        lockReason = nil
        lastUse = wallClock.now()
        armLockTimer()
        let events = vault.session.events()
        watcher = Task { [weak self] in
            for await event in events {
                switch event {
                case .hardTimeout, .stateChanged(_, .locked):
                    await self?.lock(because: "the session service locked a session")
                    return
                default:
                    continue
                }
            }
        }
        logger.info("agent unlocked", metadata: ["vault": "\(url.path)"])
    }

    /// Whether the vault is open (unlocked).
    var isOpen: Bool { opened != nil }

    /// Drops the keys: stops the service and closes the vault (its keys are wiped). `code`
    /// (`key_changed`) is kept and told until the next unlock.
    func lock(because reason: String, code: String? = nil) async {
        guard let current = opened else { return }
        opened = nil
        lockReason = code
        identity = nil
        lockTimer?.cancel()
        watcher?.cancel()
        await current.session.stop()
        try? await BlockingWork.run { current.vault.close() }
        logger.info("agent locked", metadata: ["reason": "\(reason)"])
        report("locked: \(reason)")
    }

    /// Suspends until a `stop` request (or ``requestStop()``), at once if one came already.
    func waitForStop() async {
        guard !stopWanted else { return }
        await withCheckedContinuation { stopRequested = $0 }
    }

    func requestStop() {
        stopWanted = true
        stopRequested?.resume()
        stopRequested = nil
    }

    // MARK: - Requests

    func handle(_ request: AgentRequest, peer: AgentServer.Peer) async -> AgentResponse {
        switch request.op {
        case .status:
            await checkKeysStillCurrent()
            var status = self.status
            if let opened, let active = try? await opened.session.activeAccount() {
                status.activeAccount = active.rawValue
                status.accountState = (try? await opened.session.accountState(of: active))?.name
            }
            return AgentResponse(status: status)
        case .stop:
            await lock(because: "stopped")
            requestStop()
            return AgentResponse(status: status)
        case .lock:
            await lock(because: "`vault lock`")
            return AgentResponse(status: status)
        case .unlock:
            if request.passphrase == nil, request.keyFile == nil, let terminal = request.terminal {
                // `vault unlock` at a terminal: asked through pinentry, so the passphrase goes from
                // pinentry to this process on a pipe and never crosses the socket.
                await checkKeysStillCurrent()
                guard opened == nil else { return AgentResponse(status: status) }
                switch await askToUnlock(terminal, peer: peer) {
                case .unlocked: return AgentResponse(status: status)
                case .refused(let response): return response
                }
            }
            do {
                try await unlock(resumingSessions: true) { facts in
                    if let keyFile = request.keyFile { return .keyFile(URL(fileURLWithPath: keyFile)) }
                    guard let passphrase = request.passphrase else {
                        // A vault whose key a keeper holds (the service's systemd credential, the
                        // desktop keyring; slot 0's or a slot's) unlocks again from it.
                        if let kept = try CredentialOptions.keeperCredential(for: facts) { return kept }
                        if case .keyFile = facts.unlockMethod {
                            throw CommandFailure(.usage, "the vault is unlocked with a key file: `vault unlock --key-file PATH`")
                        }
                        throw CommandFailure(.usage, "no passphrase was sent")
                    }
                    return try .passphrase(bytes: Array(passphrase.utf8))
                }
                // A prompt still up is not needed any more: its requests are served.
                endPrompt()
                return AgentResponse(status: status)
            } catch {
                return Self.failure(error)
            }
        case .token:
            return await token(request, peer: peer)
        case .dpopProof:
            return await dpopProof(request, peer: peer)
        case .credential, .unauthorized:
            return await credential(request, peer: peer)
        case .hosts:
            switch await usable(asking: request, peer: peer) {
            case .open(let current):
                lastUse = wallClock.now()
                armLockTimer()
                do {
                    return AgentResponse(hosts: try await current.session.credentialHosts())
                } catch {
                    return await failure(error)
                }
            case .answer(let answer):
                return answer
            }
        }
    }

    private func token(_ request: AgentRequest, peer: AgentServer.Peer) async -> AgentResponse {
        await serving(request, peer: peer) { current, account in
            let target = try TokenTarget(resources: request.resources, scopes: request.scopes)
            let token =
                if let ttl = request.minTTL {
                    try await current.session.validAccessToken(for: account, target: target, minimumValidity: .seconds(max(0, ttl)))
                } else {
                    try await current.session.validAccessToken(for: account, target: target)
                }
            // Once the token is obtained: a refused request moves no deadline.
            if request.sensitive { try await current.session.recordSensitiveAction(for: account) }
            var response = AgentResponse(token: AgentToken(token))
            response.sensitiveRecorded = request.sensitive
            return response
        }
    }

    /// A proof signed here for one request of the client's (the key never leaves the agent), and
    /// the token it names unless asked for none.
    private func dpopProof(_ request: AgentRequest, peer: AgentServer.Peer) async -> AgentResponse {
        guard let method = request.method, let text = request.url, let url = URL(string: text) else {
            return .failure("malformed_request", exit: ExitStatus.usage.rawValue, "a dpop_proof request names a method and a URL")
        }
        return await serving(request, peer: peer) { current, account in
            var response: AgentResponse
            if request.withoutToken {
                response = AgentResponse()
                response.proof = try await current.session.dpopProof(for: account, method: method, url: url, nonce: request.nonce)
            } else {
                let (token, proof) = try await current.session.dpopRequest(
                    for: account, target: try TokenTarget(resources: request.resources, scopes: request.scopes),
                    minimumValidity: request.minTTL.map { .seconds(max(0, $0)) }, method: method, url: url, nonce: request.nonce)
                response = AgentResponse(token: AgentToken(token))
                response.proof = proof
            }
            return response
        }
    }

    /// `body`'s answer to `request` with the open vault (unlocked through pinentry first when the
    /// request says where to ask) and the account it names; the use counted, a failure answered.
    private func serving(
        _ request: AgentRequest, peer: AgentServer.Peer, _ body: (OpenedVault, AccountID?) async throws -> AgentResponse
    ) async -> AgentResponse {
        let current: OpenedVault
        switch await usable(asking: request, peer: peer) {
        case .open(let opened): current = opened
        case .answer(let answer): return answer
        }
        lastUse = wallClock.now()
        armLockTimer()
        do {
            let account = try await request.account.asyncMap { reference in try await BlockingWork.run { try current.account(reference) } }
            return try await body(current, account)
        } catch {
            return await failure(error)
        }
    }

    private func credential(_ request: AgentRequest, peer: AgentServer.Peer) async -> AgentResponse {
        // Locked: a host the file binds to no account is answered without a prompt (decided
        // without the key, as the command does), so git asking for another host's credential
        // never makes the agent ask for the passphrase.
        if opened == nil, let scheme = request.protocol, let host = request.host {
            let asked = CredentialRequest(scheme: scheme, host: host, path: request.path, username: request.username)
            let (url, options) = (self.url, global.storeOptions())
            if let bindings = try? await BlockingWork.run({ try Vault.inspectCredentialBindings(at: url, options: options) }),
                CredentialHosts.match(bindings, asked) == nil
            {
                return AgentResponse()
            }
        }
        let current: OpenedVault
        switch await usable(asking: request, peer: peer) {
        case .open(let opened): current = opened
        case .answer(let answer): return answer
        }
        guard let scheme = request.protocol, let host = request.host else {
            return .failure("malformed_request", exit: ExitStatus.usage.rawValue, "a credential request names a protocol and a host")
        }
        lastUse = wallClock.now()
        armLockTimer()
        do {
            let asked = CredentialRequest(scheme: scheme, host: host, path: request.path, username: request.username)
            if request.op == .unauthorized {
                try await current.session.reportRefused(asked, presented: request.presented)
                return AgentResponse()
            }
            let token = try await CredentialAnswers.credential(in: current, asked, minimumValidity: .seconds(max(0, request.minTTL ?? 60)))
            return AgentResponse(token: token)
        } catch {
            return await failure(error)
        }
    }

    private enum Refusal: Error { case locked, replaced }

    /// The open vault for `request`; a locked one is first unlocked through pinentry when the
    /// request says where its sender can be asked. The answer to send instead otherwise.
    private func usable(asking request: AgentRequest, peer: AgentServer.Peer) async -> Usable {
        switch usable() {
        case .success(let current): return .open(current)
        case .failure(.replaced): return .answer(await refused(.replaced))
        case .failure(.locked):
            guard let terminal = request.terminal else { return .answer(await refused(.locked)) }
            if case .refused(let answer) = await askToUnlock(terminal, peer: peer) { return .answer(answer) }
            switch usable() {
            case .success(let current): return .open(current)
            case .failure(let refusal): return .answer(await refused(refusal))
            }
        }
    }

    /// The vault to answer a request with, or the answer to send instead.
    private enum Usable {
        case open(OpenedVault)
        case answer(AgentResponse)
    }

    /// The lock reason `status` reports when another process replaced the vault's keys.
    static let keyChangedCode = "key_changed"
    static let keyChangedReason = "the vault's keys were changed by another process (`vault rotate-key` or `vault passwd`)"

    /// Drops keys that no longer open the vault (another process rotated them): the agent
    /// then says so, instead of failing every request with a stale key.
    private func checkKeysStillCurrent() async {
        guard let current = opened else { return }
        let stale = (try? await BlockingWork.run { try !current.vault.holdsCurrentKey() }) ?? false
        if stale { await lock(because: Self.keyChangedReason, code: Self.keyChangedCode) }
    }

    /// A request's failure; one that says the keys changed locks the agent and is answered as
    /// the lock it is.
    private func failure(_ error: any Error) async -> AgentResponse {
        // Locked while the request was served: its vault closed under it. The answer is the lock
        // (exit 79, `vault unlock`), not "the vault was closed".
        if opened == nil, Self.isClosedVault(error) { return await refused(.locked) }
        guard Self.isKeyChange(error) else { return Self.failure(error) }
        await lock(because: Self.keyChangedReason, code: Self.keyChangedCode)
        return await refused(.locked)
    }

    static func isClosedVault(_ error: any Error) -> Bool {
        switch error {
        case let error as VaultError: error.code == .closed
        case let error as SessionError:
            if case .vault(let underlying) = error { underlying.code == .closed } else { false }
        default: false
        }
    }

    static func isKeyChange(_ error: any Error) -> Bool {
        switch error {
        case let error as VaultError: error.code == .keyChanged
        case let error as SessionError:
            if case .vault(let underlying) = error { underlying.code == .keyChanged } else { false }
        default: false
        }
    }

    /// The open vault, unless locked or its file was replaced.
    private func usable() -> Result<OpenedVault, Refusal> {
        guard let current = opened else { return .failure(.locked) }
        guard let identity, let now = Self.identity(of: url), now == identity else { return .failure(.replaced) }
        return .success(current)
    }

    private func refused(_ refusal: Refusal) async -> AgentResponse {
        switch refusal {
        case .locked:
            if lockReason == Self.keyChangedCode {
                return .failure(
                    "locked", exit: ExitStatus.sessionLocked.rawValue,
                    "the agent for \(url.path) is locked (key changed): \(Self.keyChangedReason); run `vault unlock`")
            }
            return .failure(
                "locked", exit: ExitStatus.sessionLocked.rawValue,
                "the agent for \(url.path) is locked: `vault unlock` (it also resumes the sessions a timeout locked)")
        case .replaced:
            await lock(because: "the vault file was replaced or removed")
            return .failure(
                "vault_replaced", exit: ExitStatus.noVault.rawValue,
                "\(url.path) was replaced or removed while the agent held its keys; the agent locked itself: `vault agent stop`, then start it again")
        }
    }

    var status: AgentStatus {
        AgentStatus(
            vault: url.path, pid: getpid(), locked: opened == nil, lockAfter: lockAfter.map { Int($0.components.seconds) },
            lastUse: lastUse, startedAt: startedAt, socket: socket.path, lockReason: opened == nil ? lockReason : nil,
            unlockedBy: opened?.vault.unlockedBy)
    }

    // MARK: - Rules

    private func armLockTimer() {
        lockTimer?.cancel()
        guard let lockAfter else { return }
        let clock = self.clock
        lockTimer = Task { [weak self] in
            do {
                try await clock.sleep(for: lockAfter)
            } catch {
                return  // re-armed by a request, or locked
            }
            await self?.lock(because: "no use for \(lockAfter.components.seconds) s (--lock-after)")
        }
    }

    static func identity(of url: URL) -> (dev: UInt64, ino: UInt64)? {
        AgentSocket.fileIdentity(url)
    }

    static func failure(_ error: any Error) -> AgentResponse {
        let failure = CommandFailure(error) ?? CommandFailure(.failure, "\(error)")
        return .failure("\(failure.code)", exit: failure.code.rawValue, failure.message)
    }
}

extension Optional where Wrapped: Sendable {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
