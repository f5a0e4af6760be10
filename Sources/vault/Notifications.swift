import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Notifications: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "notifications",
            abstract: "Sync, list and answer the account's notifications.",
            subcommands: [List.self, Sync.self, Answer.self])
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
                  vault notifications list --follow --interval 30s

                --follow prints the account's page (the active account's without --account), oldest \
                first, then syncs its newest notifications from the identity service every --interval and prints each new one as it arrives (with --json, \
                one JSON object per line) until Ctrl-C.
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
        @Flag(help: "Keep going: sync from the identity service and print new notifications as they arrive.")
        var follow = false
        @Option(help: ArgumentHelp("With --follow, how often to sync (at least 1s).", valueName: "duration"))
        var interval: TimeLimit = .after(.seconds(15))
        @OptionGroup var device: DeviceAPIOptions

        func validate() throws {
            if follow {
                guard let every = interval.duration, every >= .seconds(1) else {
                    throw ValidationError("--interval takes a duration of at least 1s, like 15s or 2m")
                }
                guard after == nil, until == nil else { throw ValidationError("--follow shows the newest: it takes no --after or --until") }
            }
            guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000") }
            if let after, NotificationCursor(after) == nil {
                throw ValidationError("--after takes the cursor printed at the end of a page, like n1.1790000180000.3")
            }
            if let since, let until, since.date >= until.date { throw ValidationError("--since must be before --until") }
        }

        func run() async throws {
            if follow { return try await runFollowing() }
            let page = try await OpenedVault.with(global, credentials) { opened in
                try opened.vault.notifications.page(
                    NotificationQuery(
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
            for n in page.items { print(Self.line(n)) }
            if let next = page.next { print("More: --after \(next)") }
        }

        static func line(_ n: NotificationRecord) -> String {
            var line =
                "\(Format.iso8601(n.createdAt))  \(n.status.rawValue)  \(Terminal.printable(n.uuid))  "
                + "\(Terminal.printable(n.subject)): \(Terminal.printable(n.message))"
            if let action = n.actionTaken { line += "  [answered: \(Terminal.printable(action))]" }
            return line
        }

        /// The newest page of the account it follows (the active one by default), oldest first,
        /// then a sync every --interval and what is new, until Ctrl-C. One open of the vault
        /// (one key derivation for a passphrase vault) for the whole run.
        private func runFollowing() async throws {
            let every = interval.duration ?? .seconds(15)
            let json = output.json
            let render: @Sendable (NotificationRecord) -> String = { n in json ? JSONValue.notification(n).compact : Self.line(n) }
            do {
                try await OpenedVault.with(global, credentials) { opened in
                    let id = try opened.account(account)
                    let shown = try opened.vault.notifications.page(NotificationQuery(account: id, pendingOnly: pending, since: since?.date, limit: limit))
                    for n in shown.items.reversed() { print(render(n)) }
                    Terminal.flushOutput()
                    let initiallySeen = Set(shown.items.map(\.uuid))
                    let initiallyNewest = shown.items.map(\.createdAt).max() ?? since?.date
                    let inbox = NotificationInbox(
                        session: opened.session, api: try device.client(for: id, in: opened, global: global),
                        logger: global.logger("credentialvault.notifications"))
                    try await Interruptible.run {
                        var seen = initiallySeen
                        var newest = initiallyNewest
                        while true {
                            let synced = try await inbox.sync(account: id, page: NotificationPageRequest(recordCount: 100, startIndex: 1))
                            for reason in synced.skipped { Terminal.printError("warning: skipped \(Terminal.printable(reason))") }
                            // Everything stored since the newest shown (another process's syncs too).
                            var query = NotificationQuery(account: id, pendingOnly: pending, since: newest, limit: 200)
                            var arrived: [NotificationRecord] = []
                            while true {
                                let page = try await inbox.list(query)
                                arrived += page.items.filter { !seen.contains($0.uuid) }
                                guard let next = page.next else { break }
                                query.after = next
                            }
                            for n in arrived.reversed() {
                                seen.insert(n.uuid)
                                print(render(n))
                            }
                            if let latest = arrived.map(\.createdAt).max(), latest > newest ?? .distantPast { newest = latest }
                            Terminal.flushOutput()
                            try await Task.sleep(for: every)
                        }
                    }
                }
            } catch let failure as CommandFailure where failure.code == .interrupted {
                return  // Ctrl-C is how a follow ends
            }
        }
    }
}

extension VaultCommand.Notifications {
    struct Sync: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "sync",
            abstract: "Fetch the account's notifications from the identity service into the vault.",
            discussion: """
                Idempotent: a notification already stored is updated, never duplicated. Without --all, the newest page. \
                --keep and --keep-count set the account's retention (stored; `--keep none` without --keep-count removes it), \
                which every sync applies after storing.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var device: DeviceAPIOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Flag(help: "Every page, not only the newest.")
        var all = false
        @Option(help: "Notifications per page (1–100).")
        var pageSize = 50
        @Option(help: ArgumentHelp("Keep no notification older than this (whole days: 90d), or `none`; stored for the account.", valueName: "duration"))
        var keep: TimeLimit?
        @Option(help: ArgumentHelp("Keep at most the newest N notifications; stored for the account.", valueName: "N"))
        var keepCount: Int?

        func validate() throws {
            guard (1...100).contains(pageSize) else { throw ValidationError("--page-size must be between 1 and 100") }
            if let keepCount, keepCount < 1 { throw ValidationError("--keep-count must be at least 1") }
            if let days = keep?.duration, days.components.seconds % 86_400 != 0 {
                throw ValidationError("--keep takes whole days, like 90d, or none")
            }
        }

        /// The retention to store: nil when neither option was given (the stored one stands).
        var retention: NotificationRetention?? {
            guard keep != nil || keepCount != nil else { return nil }
            let days = keep?.duration.map { Int($0.components.seconds / 86_400) }
            if days == nil, keepCount == nil { return .some(nil) }  // --keep none: no policy
            return .some(NotificationRetention(days: days, count: keepCount))
        }

        func run() async throws {
            let result = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                let inbox = NotificationInbox(
                    session: opened.session, api: try device.client(for: id, in: opened, global: global),
                    logger: global.logger("credentialvault.notifications"))
                if let retention { try opened.vault.accounts.setNotificationRetention(retention, for: id) }
                if all { return try await inbox.syncAll(account: id, pageSize: pageSize) }
                return try await inbox.sync(account: id, page: NotificationPageRequest(recordCount: pageSize, startIndex: 1))
            }
            for reason in result.skipped { Terminal.printError("warning: skipped \(Terminal.printable(reason))") }
            let skipped = result.skipped.isEmpty ? "" : ", \(result.skipped.count) skipped"
            print(
                "Synced \(result.received) notification\(result.received == 1 ? "" : "s") (\(result.inserted) new\(skipped)) of \(result.totalCount) at the server"
                    + (result.nextStartIndex != nil && !all ? "; more with --all." : "."))
        }
    }

    struct Answer: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "answer",
            abstract: "Answer a notification with one of the actions it offers (approve a device, say).",
            discussion: "An expired, already answered or unknown notification, or an action it does not offer, is refused without asking the server.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var device: DeviceAPIOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Argument(help: ArgumentHelp("The notification's uuid (`vault notifications list --json`).", valueName: "uuid"))
        var uuid: String
        @Argument(help: ArgumentHelp("The action, as the notification names it (approve, deny…).", valueName: "action"))
        var action: String

        func run() async throws {
            let outcome = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                let inbox = NotificationInbox(
                    session: opened.session, api: try device.client(for: id, in: opened, global: global),
                    logger: global.logger("credentialvault.notifications"))
                return try await inbox.answer(uuid, action: action, account: id)
            }
            switch outcome {
            case .answered(let record):
                print("Answered \"\(Terminal.printable(record.subject))\" with \(Terminal.printable(action)).")
            case .refused(let refusal):
                switch refusal {
                case .unknownNotification: throw CommandFailure(.noRecord, Terminal.printable(refusal.description))
                case .answerInFlight: throw CommandFailure(.busy, Terminal.printable(refusal.description))
                default: throw CommandFailure(.clientRefused, Terminal.printable(refusal.description))
                }
            }
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
