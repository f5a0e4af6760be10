import Foundation
import VaultOAuth
import VaultSession
import VaultStore
import VaultSync

/// An unlocked vault and its session service, for the length of one command.
///
/// Opening never migrates: a vault older than this tool is refused with exit code 81 and a
/// pointer to `vault migrate`, which shows the steps, backs up and applies them.
struct OpenedVault: Sendable {
    let vault: Vault
    let session: SessionService
    let url: URL
    /// What unlocked it, for ``SessionService/unlock(with:)``.
    let credential: VaultCredential

    /// Opens the vault, runs `body`, then stops the session service and closes the vault
    /// (keys wiped), whether `body` succeeded or not. The opening (a keeper asked over D-Bus, a
    /// key derivation, SQLite) runs off the cooperative pool. `slotKeepers: false` leaves the
    /// keepers of slots other than 0 out of the credential's choice.
    static func with<T>(
        _ global: GlobalOptions, _ credentials: CredentialOptions, slotKeepers: Bool = true,
        _ body: (OpenedVault) async throws -> T
    ) async throws -> T {
        let fromKeeper = Locked(false)
        let opened: OpenedVault
        do {
            opened = try await BlockingWork.run {
                try open(global) { facts in
                    let credential = try credentials.credential(for: facts, slotKeepers: slotKeepers)
                    if case .key = credential { fromKeeper.withLock { $0 = true } }
                    return credential
                }
            }
        } catch let error as VaultError where error.code == .wrongCredential && fromKeeper.withLock({ $0 }) {
            // A keeper's key that opens nothing (a sealed key left from before, an item replaced):
            // a passphrase vault asks for its passphrase instead, saying why.
            opened = try await BlockingWork.run {
                try open(global) { facts in
                    guard case .passphrase = facts.unlockMethod else { throw error }
                    Terminal.printError("vault: \(error.message); asking for the passphrase (slot 0, the recovery route)")
                    return try credentials.credential(for: facts, slotKeepers: false)
                }
            }
        }
        do {
            let result = try await body(opened)
            await opened.close()
            return result
        } catch {
            let named = opened.namingAccounts(in: error)
            await opened.close()
            throw named
        }
    }

    /// The error with every "account <id>" of the library's words (a SessionError, say) turned
    /// into how messages name an account (``AccountReference/name(of:account:)``), read while
    /// the vault is still open. ArgumentParser's own errors pass unchanged.
    func namingAccounts(in error: any Error) -> any Error {
        guard var failure = CommandFailure(error), let accounts = try? vault.accounts.all() else { return error }
        for account in accounts where failure.message.contains("account \(account.id.rawValue)") {
            failure.message = failure.message.replacingOccurrences(
                of: "account \(account.id.rawValue)",
                with: AccountReference.name(of: account.id, account: account))
        }
        return failure
    }

    /// Opens the vault with the credential `credential` chooses (it learns the unlock method
    /// from the one read-only pass that also checks the file) and makes its session service.
    /// The caller closes it (``close()``).
    static func open(
        _ global: GlobalOptions, configuration: SessionConfiguration = SessionConfiguration(),
        credential choose: (VaultOpeningFacts) throws -> VaultCredential
    ) throws -> OpenedVault {
        try open(global, configure: { _ in configuration }, credential: choose)
    }

    /// ``open(_:configuration:credential:)`` with the session service's configuration worked
    /// out from the opened vault (accounts named by the user, resolved).
    static func open(
        _ global: GlobalOptions, configure: (Vault) throws -> SessionConfiguration, credential choose: (VaultOpeningFacts) throws -> VaultCredential
    ) throws -> OpenedVault {
        // Before the vault is opened (and a passphrase derived): a bad CA file or proxy setting
        // fails here, with nothing to close.
        let transport = try transport(global)
        let url = global.url
        var chosen: VaultCredential?
        let vault = try Vault.open(at: url, options: global.storeOptions()) { facts in
            try refuseOutdated(facts)
            let credential = try choose(facts)
            chosen = credential
            return credential
        }
        guard let credential = chosen else {
            vault.close()
            throw CommandFailure(.failure, "\(url.path) was opened without a credential")
        }
        let configuration: SessionConfiguration
        do {
            configuration = try configure(vault)
        } catch {
            vault.close()
            throw error
        }
        let oauth = OAuthClient(transport: transport, logger: global.logger("credentialvault.oauth"))
        return OpenedVault(
            vault: vault,
            session: SessionService(vault: vault, oauth: oauth, configuration: configuration, logger: global.logger("credentialvault.session")),
            url: url, credential: credential)
    }

    /// NIOTransport for every request: it can check pins, opens nothing until the first request,
    /// and keeps libcurl out of the process (see NIOTransport). Its trust roots are `--ca-file`,
    /// else `$SSL_CERT_FILE`, else the system's; its proxy `HTTPS_PROXY` with `NO_PROXY`. A
    /// missing `--ca-file` or an unusable proxy setting is an error at once; a missing
    /// `SSL_CERT_FILE` (set for every process) a warning, and the system's store.
    static func transport(_ global: GlobalOptions, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> NIOTransport {
        let given = global.caFile.map { ($0, "--ca-file") } ?? environment["SSL_CERT_FILE"].flatMap { $0.isEmpty ? nil : ($0, "SSL_CERT_FILE") }
        var roots = NIOTransport.TrustRoots.system
        if let (given, source) = given {
            // Checked now, parsed at the first https request: `SSL_CERT_FILE` is often set for
            // every process, and a command that sends nothing should not parse a whole bundle.
            let path = (given as NSString).expandingTildeInPath
            do {
                try NIOTransport.TrustRoots.checkReadable(path)
                roots = .pemFile(lazily: path)
            } catch let failure where source == "SSL_CERT_FILE" {
                // Set for every process, not asked for here: the system's store, and a word.
                Terminal.printError("vault: warning: \(failure) (from SSL_CERT_FILE); using the system's certificate store")
            } catch {
                throw CommandFailure(.usage, "\(error) (from \(source))")
            }
        }
        let proxy: ProxyConfiguration?
        do {
            proxy = try ProxyConfiguration.fromEnvironment(environment)
        } catch {
            throw CommandFailure(.usage, "HTTPS_PROXY: \(error)")
        }
        return NIOTransport(timeout: httpTimeout(environment: environment), trustRoots: roots, proxy: proxy)
    }

    /// The bound on one request to the identity service: `$VAULT_HTTP_TIMEOUT` seconds (1 to
    /// 600, for a slow network or proxy), else 15 s. A value outside that range is ignored.
    static func httpTimeout(environment: [String: String] = ProcessInfo.processInfo.environment) -> Duration {
        guard let text = environment["VAULT_HTTP_TIMEOUT"], let seconds = Int(text), (1...600).contains(seconds) else { return .seconds(15) }
        return .seconds(seconds)
    }

    static func refuseOutdated(_ facts: VaultOpeningFacts) throws {
        guard let last = facts.pendingMigrations.last else { return }
        throw CommandFailure(
            .migrationNeeded,
            "\(facts.url.path) is at schema \(facts.schemaVersion), older than this tool (\(last.version)): run `vault migrate` (it shows the steps and backs up first)"
        )
    }

    func close() async {
        await session.stop()
        vault.close()
    }

    /// The account named by `reference` (see ``AccountReference``), or the active one when nil.
    func account(_ reference: String?) throws -> AccountID {
        guard let reference else {
            guard let active = try vault.accounts.activeID() else {
                throw CommandFailure(
                    .sessionEnded,
                    try vault.accounts.all().isEmpty
                        ? "the vault has no account yet: sign in with `vault login`"
                        : "no account is active: name one with --account, or sign in with `vault login`")
            }
            return active
        }
        return try AccountReference.resolve(
            reference, among: try vault.accounts.all().map { AccountReference.Candidate(id: $0.id, subject: $0.subject, label: $0.label) })
    }

    /// How messages name an account: its label or subject, escaped, with a short id.
    func name(of id: AccountID) -> String {
        AccountReference.name(of: id, account: try? vault.accounts.find(id))
    }
}

/// How commands name an account: its id or a unique prefix of 8+ characters, its label, its
/// subject, or a unique id prefix of 4+ characters, tried in that order; and how messages and
/// hints name one.
enum AccountReference {
    static let help =
        "An account: its id or a unique prefix of it (8+ characters), its label, its subject, or a unique id prefix of 4+ characters, tried in that order."

    /// What an account is known by.
    struct Candidate {
        var id: AccountID
        var subject: String
        /// Nil where the vault was read without the key (labels are sealed).
        var label: String?
    }

    /// `"Work" (alice, 1a2b3c4d)`: the label (or the subject alone) as the user knows the
    /// account, control characters escaped, and the first 8 characters of its id.
    static func name(of id: AccountID, account: Account?) -> String {
        guard let account else { return "account \(argument(id))" }
        return "account " + display(Candidate(id: id, subject: account.subject, label: account.label))
    }

    /// `"Work" (alice, 1a2b3c4d)` or `alice (1a2b3c4d)`.
    static func display(_ candidate: Candidate) -> String {
        let subject = Terminal.printable(candidate.subject)
        if let label = candidate.label, !label.isEmpty {
            return "\"\(Terminal.printable(label))\" (\(subject), \(argument(candidate.id)))"
        }
        return "\(subject) (\(argument(candidate.id)))"
    }

    /// How a hint names the account so the command can be pasted as it is: the first 8
    /// characters of its id (hex and hyphens: nothing a shell treats specially), which
    /// `--account` takes as a prefix.
    static func argument(_ id: AccountID) -> String { String(id.rawValue.prefix(8)) }

    static func resolve(_ reference: String, among accounts: [Candidate]) throws -> AccountID {
        if let exact = accounts.first(where: { $0.id.rawValue == reference }) { return exact.id }
        let steps: [(what: String, matches: (Candidate) -> Bool)] = [
            // 8+ characters of an id first: what hints print (`argument(_:)`) names that account
            // even when another one's label or subject is the same text.
            ("id prefix", { reference.count >= 8 && $0.id.rawValue.hasPrefix(reference.lowercased()) }),
            ("label", { $0.label == reference }),
            ("subject", { $0.subject == reference }),
            ("id prefix", { reference.count >= 4 && $0.id.rawValue.hasPrefix(reference.lowercased()) }),
        ]
        for step in steps {
            let found = accounts.filter(step.matches)
            if found.count == 1 { return found[0].id }
            if found.count > 1 {
                let listed = found.map { "`--account \(argument($0.id))` for \(display($0))" }.joined(separator: ", ")
                throw CommandFailure(
                    .usage, "\(Terminal.printable(reference)) is the \(step.what) of \(found.count) accounts: name one by its id: \(listed)")
            }
        }
        throw CommandFailure(.noRecord, "no account \(Terminal.printable(reference)) in the vault: `vault accounts list` shows them")
    }
}
