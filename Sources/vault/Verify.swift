import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Verify: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check the vault: SQLite's integrity check, then every sealed value.",
            discussion: """
                Runs PRAGMA integrity_check and foreign_key_check, then opens every sealed value \
                (tokens, client secrets, labels, e-mails, device names, notification texts) with \
                freshly unwrapped keys. Reports each damaged value by table, row and column, \
                records the result in the vault (see `vault status`), and exits with 65 when \
                anything is damaged. A progress bar is drawn on a terminal.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            // Every row read and checked: off the cooperative pool (rule 8), bar and all.
            let report = try await OpenedVault.with(global, credentials) { opened in
                try await BlockingWork.run { [vault = opened.vault] in
                    let bar = ProgressBar("Verifying")
                    defer { bar.finish() }
                    return try vault.maintenance.verify { bar.update($0.completed, of: $0.total) }
                }
            }
            if output.json {
                print(JSONValue.verification(report).rendered, terminator: "")
            } else {
                print(report.databaseProblems.isEmpty ? "SQLite integrity check: ok" : "SQLite integrity check: FAILED")
                report.databaseProblems.forEach { print("  \($0)") }
                print(
                    "Sealed values: \(report.sealedValuesOpened) open, \(report.damaged.count) damaged"
                        + (report.sealedValuesSkipped > 0 ? ", \(report.sealedValuesSkipped) not checked (their key is damaged)" : ""))
                print("Rows: \(report.rowsAuthenticated) authentic")
                report.damaged.forEach { print("  damaged: \($0)") }
            }
            guard report.passed else {
                throw CommandFailure(
                    .damaged,
                    "\(global.url.path) is damaged (\(report.damaged.count) damaged value(s) or edited column(s), \(report.databaseProblems.count) database problem(s)); restore it from a backup, or, when only rows deleted or put back are listed and the file must be kept as it is, run `vault repair --accept-current`"
                )
            }
        }
    }
}
