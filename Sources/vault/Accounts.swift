import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Accounts: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "accounts",
            abstract: "Add, list, show, switch and remove accounts.",
            discussion: """
                An account is one sign-in to an identity service: its OAuth client settings, its \
                tokens (sealed) and its sessions. The active account is the one tools get tokens \
                for when they name none. Commands take an account as its id, a unique prefix of the \
                id (4+ characters) or its subject.
                """,
            subcommands: [Add.self, List.self, Show.self, Switch.self, SetPolicy.self, SetHost.self, ClientKey.self, Remove.self])
    }
}

extension VaultCommand.Accounts {
    struct List: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List the accounts, the active one marked with *.",
            discussion: "Shows each account's subject, issuer, label, session state and tokens (present, expires in …), never a token.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let views = try await OpenedVault.with(global, credentials) { opened in
                var views: [AccountView] = []
                for account in try opened.vault.accounts.all() { views.append(try await AccountView.load(account.id, in: opened)) }
                return views
            }
            if output.json {
                print(JSONValue.array(views.map(\.json)).rendered, terminator: "")
            } else if views.isEmpty {
                print("No accounts. Import a sign-in with `vault accounts add`.")
            } else {
                print(views.map(\.summary).joined(separator: "\n"))
            }
        }
    }

    struct Show: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Show one account in full (never its tokens or client secret).")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: ArgumentHelp(AccountReference.help, valueName: "account"))
        var account: String?

        func run() async throws {
            let view = try await OpenedVault.with(global, credentials) { opened in
                try await AccountView.load(try opened.account(account), in: opened)
            }
            print(output.json ? view.json.rendered : view.detail + "\n", terminator: "")
        }
    }

    struct Switch: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "switch",
            abstract: "Make another account the active one.",
            discussion: "Every tool using the vault sees the change: the active account is stored in the vault.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Argument(help: ArgumentHelp(AccountReference.help, valueName: "account"))
        var account: String

        func run() async throws {
            let view = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                try await opened.session.switchAccount(to: id)
                return try await AccountView.load(id, in: opened)
            }
            print("Active now: \(AccountReference.name(of: view.account.id, account: view.account)) at \(Terminal.printable(view.account.issuer)).")
        }
    }

    struct Remove: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "remove",
            abstract: "Sign an account out and delete every record of it.",
            discussion: """
                First revokes the account's refresh token at the identity service when it has a \
                revocation endpoint (RFC 7009); a server that refuses or cannot be reached is a \
                warning and does not stop the removal. Then deletes the account, its tokens, \
                sessions, devices, notifications and its key, and makes the oldest remaining \
                account active if it was the active one, in one transaction. Then folds the \
                write-ahead log into the file; if another process is reading the vault, a warning \
                says so and `vault compact` finishes it later. Asks for confirmation on a \
                terminal; elsewhere pass --yes.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Argument(help: ArgumentHelp(AccountReference.help, valueName: "account"))
        var account: String
        @Flag(help: "Do not revoke the refresh token at the identity service; only delete local data.")
        var noRevoke = false
        @Flag(name: [.customShort("y"), .long], help: "Do not ask for confirmation.")
        var yes = false
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let (removed, report, next) = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                guard let stored = try opened.vault.accounts.find(id) else { throw CommandFailure(.noRecord, "no account \(id)") }
                if !yes {
                    guard Terminal.standardInputIsTerminal else {
                        throw CommandFailure(
                            .usage, "removing \(AccountReference.name(of: id, account: stored)) deletes all of its data: pass --yes to confirm")
                    }
                    guard
                        Terminal.confirm(
                            "Remove \(AccountReference.name(of: id, account: stored)) at \(Terminal.printable(stored.issuer)) and all of its data?")
                    else {
                        throw CommandFailure(.failure, "nothing was removed")
                    }
                }
                let report = try await opened.session.signOut(id, revoke: !noRevoke)
                let next = try report.removal.active.flatMap { try opened.vault.accounts.find($0) }
                return (stored, report, next)
            }
            report.revocation.warnIfAlive(AccountReference.name(of: removed.id, account: removed))
            if output.json {
                let members: [(String, JSONValue)] = [("account", .string(removed.id.rawValue))] + report.revocation.jsonMembers
                print(JSONValue.object(members + [("active", report.removal.active.map { .string($0.rawValue) } ?? .null)]).rendered, terminator: "")
                return
            }
            print("Removed \(AccountReference.name(of: removed.id, account: removed)) at \(Terminal.printable(removed.issuer)).")
            if report.removal.previousActive == removed.id {
                print(
                    next.map { "Active now: \(AccountReference.name(of: $0.id, account: $0)) at \(Terminal.printable($0.issuer))." }
                        ?? "No account is active now.")
            }
            switch report.removal.checkpoint {
            case .blockedByReader?, .failed?:
                Terminal.printError(
                    "vault: warning: \(report.removal.checkpoint.map { "\($0)" } ?? ""); the removed account's encrypted data stays in the vault file and its -wal until a checkpoint completes (the next one runs when a process that wrote to the vault closes it); run `vault compact` once the other process has finished to clear it now"
                )
            case .completed?, nil:
                break
            }
        }
    }
}

/// An account as the commands show it: settings, session state and token presence.
struct AccountView {
    var account: Account
    var active: Bool
    var status: SessionSummary
    var tokens: TokenMetadata?
    var session: SessionRecord?
    var policy: SessionPolicy
    /// The one vocabulary for the seeds' states (device activation included).
    var state: AccountState

    static func load(_ id: AccountID, in opened: OpenedVault) async throws -> AccountView {
        // Judged now: a deadline that passed while no process ran takes effect here, as in every tool.
        let status = try await opened.session.status(of: id)
        guard let account = try opened.vault.accounts.find(id) else {
            throw CommandFailure(.noRecord, "no account \(id) in the vault")
        }
        return AccountView(
            account: account, active: try opened.vault.accounts.activeID() == id, status: SessionSummary(status),
            tokens: try opened.vault.tokens.metadata(for: id), session: try opened.vault.sessions.current(for: id),
            policy: try opened.vault.sessions.policy(for: id), state: try await opened.session.accountState(of: id))
    }

    var json: JSONValue {
        .account(account, active: active, status: status, tokens: tokens, session: session, policy: policy)
            .adding("account_state", .string(state.name))
    }

    var tokenText: String {
        guard let tokens else { return "no tokens" }
        let expiry =
            tokens.accessTokenExpiresAt.map {
                $0 > CommandTime.wall.now() ? "expires \(Format.relative($0))" : "expired \(Format.relative($0))"
            } ?? "expiry unknown"
        // A client's account never holds one: its tokens come from its own credentials.
        guard account.grant == .delegated else { return "access token present, \(expiry); obtained again with the client's credentials when due" }
        return "access token present, \(expiry); refresh token \(tokens.hasRefreshToken ? "present" : "absent")"
    }

    var summary: String {
        let label = account.label.map { " \"\(Terminal.printable($0))\"" } ?? ""
        var tags: [String] = []
        if account.kind == .guest { tags.append(account.upgradedTo.map { "guest, upgraded to \($0)" } ?? "guest") }
        if account.grant == .clientCredentials { tags.append("client") }
        if account.hasDPoPKey { tags.append("DPoP") }
        let kind = tags.isEmpty ? "" : " [\(tags.joined(separator: ", "))]"
        return "\(active ? "*" : " ") \(account.id)  \(Terminal.printable(account.subject)) at \(Terminal.printable(account.issuer))\(label)\(kind)\n"
            + "    session \(status.text); \(tokenText)"
    }

    static func subjectNote(_ source: SubjectSource?) -> String {
        switch source {
        case .verified?: " (verified ID token)"
        case .unverified?: " (from an unverified ID token)"
        case .given?: " (given at import)"
        case .generated?: " (made up: no user was named)"
        case nil: ""
        }
    }

    var detail: String {
        var rows: [(String, String)] = [
            ("Account", account.id.rawValue + (active ? " (active)" : "")),
            ("Subject", Terminal.printable(account.subject) + Self.subjectNote(account.subjectSource)),
            (
                "Kind",
                account.kind == .guest
                    ? "guest" + (account.upgradedTo.map { ", upgraded to \($0)" } ?? "")
                    : account.grant == .clientCredentials ? "client (client credentials grant: no user, no refresh token)" : "registered"
            ),
            ("Issuer", Terminal.printable(account.issuer)),
            ("Label", account.label.map(Terminal.printable) ?? "none"),
            ("E-mail", account.email.map(Terminal.printable) ?? "none"),
            ("Token endpoint", Terminal.printable(account.client.tokenEndpoint.absoluteString)),
            ("Revocation", account.client.revocationEndpoint.map { Terminal.printable($0.absoluteString) } ?? "none"),
            ("Redirect URI", account.client.redirectURI.map(Terminal.printable) ?? "http://127.0.0.1/callback (the default)"),
            ("CA file", account.client.caFile.map(Terminal.printable) ?? "none (the process's trust roots)"),
            ("Client id", Terminal.printable(account.client.clientID)),
            (
                "Client auth",
                account.client.authentication.rawValue + (account.hasClientSecret ? " (secret stored)" : "")
                    + (account.hasClientSigningKey ? " (signing key stored: `vault accounts client-key` prints its public half)" : "")
            ),
            ("Added", Format.iso8601(account.createdAt)),
            (
                "Origin",
                account.origin.map { origin in
                    "imported \(Format.iso8601(origin.importedAt)) from \(origin.host.map(Terminal.printable) ?? "another machine") "
                        + "(vault \(Terminal.printable(origin.vault)), \(origin.mode == .move ? "moved" : "access token only"), "
                        + "transfer \(Terminal.printable(origin.transfer)))"
                } ?? "added or signed in here"
            ),
            ("Session", status.text),
            ("State", state.description),
            ("Tokens", tokenText),
            (
                "Token binding",
                account.hasDPoPKey
                    ? "DPoP (RFC 9449): bound to a key the vault keeps; `vault dpop-proof` signs for requests"
                    : "bearer (whoever holds a token can use it)"
            ),
        ]
        if let session {
            rows.append(("Started", Format.iso8601(session.startedAt)))
            rows.append(("Authenticated", "\(Format.iso8601(session.lastAuthentication)) (\(Format.relative(session.lastAuthentication)))"))
            if let idle = session.idleDeadline { rows.append(("Idle deadline", "\(Format.iso8601(idle)) (\(Format.relative(idle)))")) }
            if let absolute = session.absoluteDeadline {
                rows.append(("Ends at latest", "\(Format.iso8601(absolute)) (\(Format.relative(absolute)))"))
            }
        }
        rows.append(("Policy", Format.policy(policy)))
        rows.append(
            (
                "Notifications",
                account.notificationRetention.map { retention in
                    "keeps "
                        + [retention.days.map { "\($0) days" }, retention.count.map { "the newest \($0)" }].compactMap { $0 }.joined(separator: ", at most ")
                } ?? "keeps all history"
            ))
        return rows.map { "\($0.0.padding(toLength: 16, withPad: " ", startingAt: 0))\($0.1)" }.joined(separator: "\n")
    }
}
