import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Events: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "events",
            abstract: "Print the session event log: refreshes, revocations, failures, warnings, locks, switches…",
            discussion: """
                Every process using the vault records what it does to a session in the vault's event \
                log, and every session service sees what the others record. This prints the newest \
                entries, oldest first; --follow keeps printing new ones as any process records them \
                (like `journalctl -f`), until interrupted. The server's words (a revocation's \
                description) are sealed in the log and shown only with the vault's credential. \
                The log keeps at most 10,000 entries and none older than 30 days.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @Option(help: ArgumentHelp("Only this account's events. " + AccountReference.help, valueName: "account"))
        var account: String?
        @Option(name: [.customShort("n"), .long], help: ArgumentHelp("How many of the newest entries to print first.", valueName: "count"))
        var lines = 20
        @Flag(name: [.customShort("f"), .long], help: "Keep printing new entries as they are recorded.")
        var follow = false

        func validate() throws {
            if lines < 0 { throw ValidationError("--lines must not be negative") }
        }

        func run() async throws {
            try await OpenedVault.with(global, credentials) { opened in
                let id = try account.map { try opened.account($0) }
                let names = Dictionary(try opened.vault.accounts.all().map { ($0.id, $0.subject) }, uniquingKeysWith: { first, _ in first })
                var last: Int64 = 0
                for entry in try opened.vault.events.latest(account: id, limit: lines) {
                    print(render(entry, names: names))
                    last = entry.seq
                }
                if last == 0 { last = try opened.vault.events.lastSeq() }
                guard follow else { return }
                Terminal.flushOutput()
                var version = try opened.vault.dataVersion()
                while !Task.isCancelled {
                    try await Task.sleep(for: .milliseconds(200))
                    let now = try opened.vault.dataVersion()
                    guard now != version else { continue }
                    version = now
                    for entry in try opened.vault.events.list(after: last, account: id) {
                        print(render(entry, names: names))
                        last = entry.seq
                    }
                    Terminal.flushOutput()
                }
            }
        }

        private func render(_ entry: StoredEvent, names: [AccountID: String]) -> String {
            if output.json {
                var fields: [(String, JSONValue)] = [
                    ("seq", .int(entry.seq)), ("at", .date(entry.at)), ("account", .text(entry.account?.rawValue)),
                    ("kind", .string(entry.kind)),
                ]
                fields.append(("data", .object(entry.data.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.string($0.value)) })))
                fields += [("detail", .text(entry.detail)), ("origin", .string(entry.origin)), ("authentic", .bool(entry.authentic))]
                return JSONValue.object(fields).compact
            }
            var line = "\(Format.iso8601(entry.at))  "
            line += entry.account.map { Terminal.printable(names[$0] ?? $0.rawValue) } ?? "-"
            line += "  \(entry.kind)"
            for (key, value) in entry.data.sorted(by: { $0.key < $1.key }) {
                let shown =
                    key.hasSuffix("deadline") || key.hasSuffix("_at")
                    ? Int64(value).map { Format.iso8601(Date(timeIntervalSince1970: TimeInterval($0) / 1000)) } ?? value : value
                line += " \(key)=\(Terminal.printable(shown))"
            }
            if let detail = entry.detail { line += "  (\(Terminal.printable(detail)))" }
            line += "  [\(entry.origin.split(separator: "-").first.map(String.init) ?? entry.origin)]"
            if !entry.authentic { line += "  FAILS ITS CHECK: written without the vault key" }
            return line
        }
    }
}
