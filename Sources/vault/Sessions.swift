import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Sessions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sessions",
            abstract: "List, end, unlock, export and import sign-in sessions.",
            discussion: """
                Each sign-in starts a session with deadlines from the account's policy: an idle \
                timeout (lock or expire), an absolute lifetime and a background timeout. A locked \
                session resumes after `vault sessions unlock`; an expired one needs a new sign-in. \
                `vault sessions export` hands a session to another vault without a new sign-in.
                """,
            subcommands: [List.self, End.self, Unlock.self, Extend.self, ExportSession.self, ImportSession.self])
    }
}

extension VaultCommand.Sessions {
    struct List: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List sessions, newest first (no passphrase needed).",
            discussion:
                "Shows the state the next use will find: a session whose idle, background or absolute deadline passed shows as locked or expired (\"at next use\"), though the vault applies it when a command next unlocks it."
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Option(help: ArgumentHelp("Only this account's sessions. " + AccountReference.help, valueName: "account"))
        var account: String?

        func run() async throws {
            let metadata = try Vault.metadata(at: global.url, options: global.storeOptions(), includeNotifications: false)
            var sessions = metadata.sessions
            if let account {
                // Read without the key: labels are sealed, so an id, a subject or an id prefix.
                let id = try AccountReference.resolve(
                    account, among: metadata.accounts.map { AccountReference.Candidate(id: $0.id, subject: $0.subject, label: nil) })
                sessions = sessions.filter { $0.account == id }
            }
            let policies = Dictionary(metadata.accounts.map { ($0.id, $0.policy ?? SessionPolicy()) }, uniquingKeysWith: { first, _ in first })
            let now = CommandTime.wall.now()
            let due = sessions.map { $0.stateAtNextUse(policy: policies[$0.account] ?? SessionPolicy(), now: now) }
            if output.json {
                // This install's device registrations, by account (a pending one: not fully signed in).
                let thisDevice = Dictionary(
                    metadata.devices.filter { $0.deviceID == metadata.inspection.deviceID }.map { ($0.account, $0.status) },
                    uniquingKeysWith: { first, _ in first })
                let rows = zip(sessions, due).map { session, due in
                    let state = AccountState(
                        session: session, policy: policies[session.account] ?? SessionPolicy(), thisDevice: thisDevice[session.account], now: now)
                    return JSONValue.session(session)
                        .adding("state_at_next_use", .string(due.state.rawValue))
                        .adding("end_reason_at_next_use", .text(due.reason?.rawValue))
                        .adding("account_state", .string(state.name))
                }
                print(JSONValue.array(rows).rendered, terminator: "")
                return
            }
            guard !sessions.isEmpty else {
                print("No sessions.")
                return
            }
            let subjects = Dictionary(metadata.accounts.map { ($0.id, $0.subject) }, uniquingKeysWith: { first, _ in first })
            for (session, due) in zip(sessions, due) {
                var line = "\(session.id)  \(Terminal.printable(subjects[session.account] ?? session.account.rawValue))  \(due.state.rawValue)"
                if due.state != session.state {
                    line += " (\(Terminal.printable(due.reason?.rawValue ?? "deadline passed")), at next use)"
                } else if let reason = session.endReason {
                    line += " (\(Terminal.printable(reason)))"
                }
                line += "  started \(Format.iso8601(session.startedAt))"
                if let ended = session.endedAt {
                    line += ", ended \(Format.iso8601(ended))"
                } else if let absolute = session.absoluteDeadline {
                    line += ", ends at latest \(Format.relative(absolute))"
                }
                print(line)
            }
        }
    }

    struct End: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "end",
            abstract: "End an account's session now: its grant is revoked, its tokens are wiped, the account stays.",
            discussion: """
                First revokes the refresh token at the identity service when it has a revocation \
                endpoint (RFC 7009), as `vault accounts remove` does; a provider without one, or one \
                that refuses or cannot be reached, is a warning (and `revoked: false` with the reason \
                in --json), and the session ends here all the same. The account's tools get exit \
                code 80 (sign in again) until the next `vault login --account`.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Flag(help: "Do not revoke the refresh token at the identity service; only end the session here.")
        var noRevoke = false

        func run() async throws {
            let (id, ended, revocation) = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                let revocation = try await opened.session.endSession(for: id, revoke: !noRevoke)
                return (id, opened.name(of: id), revocation)
            }
            revocation.warnIfAlive(ended)
            if output.json {
                print(JSONValue.object([("account", .string(id.rawValue))] + revocation.jsonMembers).rendered, terminator: "")
                return
            }
            print("Ended the session of \(ended); its tokens were wiped" + (revocation.revoked ? " and its grant revoked." : "."))
        }
    }

    struct Extend: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "extend",
            abstract: "Ask the identity service for more idle time, during the idle warning.",
            discussion: """
                The session's idle deadline moves by its idle timeout when the identity service grants \
                it (the codelab's extendSessionIdleTimeout). Refused without asking before the warning \
                window, at the policy's extension limit, or at the absolute lifetime (exit 1); refused \
                by the server with its message (exit 76).
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var device: DeviceAPIOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?

        func run() async throws {
            let (id, result) = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                return (id, try await opened.session.extendSession(for: id, askingServer: try device.client(for: id, in: opened, global: global)))
            }
            switch result {
            case .extended(let deadline, let remaining):
                print(
                    "Extended: the session now idles out at \(Format.iso8601(deadline)) (\(Format.relative(deadline))); "
                        + "\(remaining) extension\(remaining == 1 ? "" : "s") left.")
            case .refusedByServer(let code, let message):
                throw CommandFailure(
                    .clientRefused,
                    "the identity service refused the extension"
                        + (code.map { " (\(Terminal.printable($0)))" } ?? "") + (message.map { ": \(Terminal.printable($0))" } ?? ""))
            case .ignored:
                throw CommandFailure(.busy, "another extension request for this session is in flight; try again")
            case .refused(let reason):
                switch reason {
                case .sessionOver:
                    throw CommandFailure(.sessionEnded, "the session is over: sign in again: `vault login --account \(AccountReference.argument(id))`")
                case .notInWarningWindow:
                    throw CommandFailure(.failure, "not in the idle warning yet: extensions are asked for when the session is about to idle out")
                case .limitReached: throw CommandFailure(.failure, "the session's policy allows no more extensions")
                case .absoluteLifetimeReached: throw CommandFailure(.failure, "the session reached its absolute lifetime: it cannot be extended")
                case .noIdleTimeout: throw CommandFailure(.failure, "the session has no idle timeout: there is nothing to extend")
                case .noActivitySinceExtension:
                    throw CommandFailure(
                        .failure,
                        "nothing used the session since its last extension, and an idle session is not extended again: "
                            + "use it to keep it open (`vault token --sensitive` always counts; under `--activity any` any token request does), or unlock it after it locks"
                    )
                case .serverRefused: throw CommandFailure(.clientRefused, "the identity service refused the extension")
                }
            }
        }
    }

    struct Unlock: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "unlock",
            abstract: "Resume every locked session (after an idle or background timeout).",
            discussion: "Each locked session becomes active with a fresh idle deadline, unless its absolute lifetime has passed.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions

        func run() async throws {
            let unlocked = try await OpenedVault.with(global, credentials) { opened in
                let before = try opened.vault.sessions.all().filter { $0.state == .locked }.count
                try await opened.session.unlock(with: opened.credential)
                let after = try opened.vault.sessions.all().filter { $0.state == .locked }.count
                return before - after
            }
            print(unlocked == 0 ? "No session was locked." : "Unlocked \(unlocked) session\(unlocked == 1 ? "" : "s").")
        }
    }
}
