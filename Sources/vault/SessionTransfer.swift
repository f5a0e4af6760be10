import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Recipient: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "recipient",
            abstract: "Print this vault's recipient key, for `vault sessions export --to` on another machine.",
            discussion: """
                One line starting with cvr1: (an X25519 public key and a checksum), safe to paste and to \
                share. It is derived from the vault key: `vault rotate-key` gives the vault a new one.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions

        func run() async throws {
            let recipient = try await OpenedVault.with(global, credentials) { opened in try await opened.session.recipient() }
            print(recipient.description)
        }
    }
}

extension VaultCommand.Sessions {
    struct ExportSession: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Seal an account's session to another vault's recipient key and write it to standard output.",
            discussion: """
                The blob (one line starting with cvsession1:) holds the account's settings, session \
                policy, deadlines and tokens, sealed with a libsodium sealed box to the recipient, and \
                is importable once, for --expires-in (default 10m). It never holds a token in clear.

                --move (the default when the account has a refresh token): once the blob is written, \
                this vault wipes the account's tokens and ends its session (exported), so only the \
                importing vault holds the refresh token; the grant is not revoked (it is the one \
                that moved), and the command says so. --access-only: only the access token and \
                its expiry go; this vault keeps the grant.

                On the other machine: `vault sessions import < blob`.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Option(name: .customLong("to"), help: ArgumentHelp("The importing vault's recipient key (`vault recipient` there).", valueName: "recipient"))
        var recipient: String
        @Flag(help: "Hand over the whole grant; this vault's session ends (default with a refresh token).")
        var move = false
        @Flag(help: "Hand over only the access token and its expiry; this vault keeps the grant.")
        var accessOnly = false
        @Option(name: .customLong("expires-in"), help: ArgumentHelp("How long the blob can be imported (at most 24h).", valueName: "duration"))
        var expiresIn: TimeLimit = .after(.seconds(600))

        func validate() throws {
            if move && accessOnly { throw ValidationError("--move and --access-only exclude each other") }
            guard let lifetime = expiresIn.duration, lifetime <= .seconds(86_400) else {
                throw ValidationError("--expires-in takes a duration of at most 24h, like 10m")
            }
        }

        func run() async throws {
            let recipient: SessionRecipient
            do {
                recipient = try SessionRecipient(parsing: self.recipient)
            } catch let refusal as SessionTransferError {
                throw CommandFailure(.usage, "--to: \(refusal.message)")
            }
            // A reader that goes away makes the write fail (and nothing is let go of), not the process die.
            signal(SIGPIPE, SIG_IGN)
            let mode: SessionTransferMode? = move ? .move : accessOnly ? .accessOnly : nil
            let report = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                let request = SessionExportRequest(account: id, recipient: recipient, mode: mode, lifetime: expiresIn.duration ?? .seconds(600))
                return try await opened.session.exportSession(request) { blob in
                    guard Self.write(blob + "\n") else {
                        throw CommandFailure(.storage, "could not write the export to standard output; nothing was exported")
                    }
                }
            }
            let moved = report.transfer.mode == .move
            Terminal.printError(
                "Exported the session of account \(report.transfer.account) to recipient \(report.transfer.peer) "
                    + "(\(moved ? "moved: this vault's session ended" : "access token only: this vault keeps the grant")); "
                    + "import it before \(Format.iso8601(report.transfer.expiresAt)).")
            if moved {
                // Not revoked, and said so: the refresh token is the one the export carries.
                Terminal.printError(
                    "The grant was not revoked at the identity service: it moved with the export. If the export is never imported, "
                        + "the provider may accept it until it expires; after the import, `vault sessions end` there revokes it.")
            }
        }

        /// The whole line in one write(2) loop on standard output, unbuffered: written before
        /// the grant is let go of.
        static func write(_ text: String) -> Bool {
            let bytes = Array(text.utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes { Foundation.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }
    }

    struct ImportSession: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Store a session exported to this vault (`vault sessions export`), read from standard input.",
            discussion: """
                The account is added (or the one of that issuer and subject gets the new tokens) with \
                the session's policy and its original absolute deadline. An expired, already imported, \
                changed or wrongly addressed export is refused (exit 89) and nothing is stored.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            if Terminal.standardInputIsTerminal {
                Terminal.printError("Paste the export (one line starting with cvsession1:), then press Ctrl-D:")
            }
            let input = try BoundedInput.read(limit: 256 * 1024, what: "a session export")
            guard let text = String(data: input, encoding: .utf8), !text.isEmpty else {
                throw CommandFailure(.transferRefused, "standard input is not a session export: pipe the output of `vault sessions export` into it")
            }
            let (report, view) = try await OpenedVault.with(global, credentials) { opened in
                let report = try await opened.session.importSession(text)
                return (report, try await AccountView.load(report.account.id, in: opened))
            }
            if output.json {
                print(view.json.rendered, terminator: "")
                return
            }
            let name = report.account.label.map { "\"\(Terminal.printable($0))\"" } ?? Terminal.printable(report.account.subject)
            print(
                "Imported the session of \(name) (account \(report.account.id)) from "
                    + "\(report.senderHost.map { Terminal.printable($0) } ?? "another machine") (vault \(report.transfer.peer)); "
                    + (report.hasRefreshToken ? "this vault now holds its refresh token." : "access token only, no refresh token."))
            if let absolute = report.session.absoluteDeadline {
                print("  The session ends at the latest \(Format.iso8601(absolute)) (\(Format.relative(absolute))), as it would have there.")
            }
            if report.replacedExisting { print("  The account was already here: its tokens were replaced and its previous session ended.") }
            if !report.skippedHosts.isEmpty {
                print("  Not set as credential hosts (another account here has them): \(report.skippedHosts.map(Terminal.printable).joined(separator: ", "))")
            }
            print("  \(view.tokenText)")
        }
    }
}

/// Standard input up to a bound, refused as soon as the bound is crossed (nothing more is read).
enum BoundedInput {
    static func read(limit: Int, what: String) throws -> Data {
        var data = Data()
        while true {
            let chunk = FileHandle.standardInput.readData(ofLength: min(64 * 1024, limit + 1 - data.count))
            if chunk.isEmpty { return data }
            data.append(chunk)
            if data.count > limit {
                throw CommandFailure(.usage, "standard input is larger than \(Format.bytes(Int64(limit))): not \(what)")
            }
        }
    }
}
