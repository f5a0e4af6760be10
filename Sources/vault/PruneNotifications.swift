import ArgumentParser
import Foundation
import VaultStore

extension VaultCommand {
    struct PruneNotifications: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "prune-notifications",
            abstract: "Delete old notification history.",
            discussion: """
                Deletes notifications created longer ago than --older-than, and/or all but the \
                newest --keep of each account. At least one of the two is required.

                Examples:
                  vault prune-notifications --older-than 90d
                  vault prune-notifications --keep 500 --account alice
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Option(help: ArgumentHelp("Delete notifications older than this (for example 90d, 12h).", valueName: "duration"))
        var olderThan: TimeLimit?
        @Option(help: ArgumentHelp("Keep only the newest N notifications of each account.", valueName: "n"))
        var keep: Int?
        @Option(help: ArgumentHelp("Only this account's history. " + AccountReference.help, valueName: "account"))
        var account: String?

        func validate() throws {
            if olderThan == nil && keep == nil {
                throw ValidationError("say what to delete: --older-than DURATION (e.g. 90d) and/or --keep N")
            }
            if case .unlimited? = olderThan { throw ValidationError("--older-than needs a duration such as 90d") }
            if let keep, keep < 0 { throw ValidationError("--keep must not be negative") }
        }

        func run() async throws {
            let removed = try await OpenedVault.with(global, credentials) { opened in
                try opened.vault.notifications.prune(
                    olderThan: olderThan?.duration.map { opened.vault.wallClock.now().addingTimeInterval(-$0.timeInterval) },
                    keepNewest: keep, account: try account.map { try opened.account($0) })
            }
            print("Removed \(removed) notification\(removed == 1 ? "" : "s").")
        }
    }
}
