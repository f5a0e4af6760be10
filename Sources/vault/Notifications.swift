import ArgumentParser
import Foundation
import VaultStore

extension VaultCommand {
    struct Notifications: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "notifications",
            abstract: "Read the notification history.",
            subcommands: [List.self])
    }
}

extension VaultCommand.Notifications {
    struct List: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List notifications, newest first, one page at a time.",
            discussion: """
                A page ends with the cursor of the next one: pass it to --after to continue.

                Examples:
                  vault notifications list --pending
                  vault notifications list --since 2026-01-01 --limit 20
                  vault notifications list --after n1.1790000180000.3
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @Option(help: ArgumentHelp("Only this account's notifications. " + AccountReference.help, valueName: "account"))
        var account: String?
        @Flag(help: "Only notifications still waiting for an answer.")
        var pending = false
        @Option(help: ArgumentHelp("Only those created at or after this time (ISO 8601, or a date: 2026-01-31).", valueName: "time"))
        var since: Timestamp?
        @Option(help: ArgumentHelp("Only those created before this time (ISO 8601, or a date).", valueName: "time"))
        var until: Timestamp?
        @Option(help: "At most this many per page (1–1000).")
        var limit = 50
        @Option(help: ArgumentHelp("Continue after this cursor (printed at the end of the previous page).", valueName: "cursor"))
        var after: String?

        func validate() throws {
            guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000") }
            if let after, NotificationCursor(after) == nil {
                throw ValidationError("--after takes the cursor printed at the end of a page, like n1.1790000180000.3")
            }
            if let since, let until, since.date >= until.date { throw ValidationError("--since must be before --until") }
        }

        func run() async throws {
            let page = try await OpenedVault.with(global, credentials) { opened in
                try opened.vault.notifications(NotificationQuery(
                    account: try account.map { try opened.account($0) }, pendingOnly: pending, since: since?.date,
                    until: until?.date, limit: limit, after: after.flatMap(NotificationCursor.init)))
            }
            if output.json {
                let json: JSONValue = [
                    "notifications": .array(page.items.map(JSONValue.notification)),
                    "next_cursor": .text(page.next?.description),
                ]
                print(json.rendered, terminator: "")
                return
            }
            if page.items.isEmpty { print("No notifications.") }
            for n in page.items {
                var line = "\(Format.iso8601(n.createdAt))  \(n.status.rawValue)  \(n.subject): \(n.message)"
                if let action = n.actionTaken { line += "  [answered: \(action)]" }
                print(line)
            }
            if let next = page.next { print("More: --after \(next)") }
        }
    }
}

/// A point in time on the command line: ISO 8601 (`2026-01-31T09:30:00Z`) or a UTC date (`2026-01-31`).
struct Timestamp: ExpressibleByArgument {
    var date: Date

    init?(argument: String) {
        let full = ISO8601DateFormatter()
        let dateOnly = ISO8601DateFormatter()
        dateOnly.formatOptions = [.withFullDate]
        guard let date = full.date(from: argument) ?? dateOnly.date(from: argument) else { return nil }
        self.date = date
    }
}
