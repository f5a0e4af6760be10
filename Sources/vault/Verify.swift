import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Verify: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check the vault: SQLite's structure check, then every row's MAC and commitment.",
            discussion: """
                Checks every row's MAC (which covers every byte of it, sealed values included), \
                every row the sessions read against the vault's manifest, and every collection \
                (devices, notifications, events, session transfers) against its commitment, so \
                an edited, deleted or put-back row is found; unwraps each account's data keys; \
                and runs PRAGMA quick_check and foreign_key_check beside it. With --deep it also \
                opens every sealed value (tokens, client secrets, labels, e-mails, device names, \
                notification texts) with freshly unwrapped keys and runs the full PRAGMA \
                integrity_check: about twice the time on a large history, and what to run after \
                a crash, a disk fault or an upgrade. Reports each damaged value by table, row \
                and column, records the result in the vault (see `vault status`), and exits with \
                65 when anything is damaged. A progress bar is drawn on a terminal.
                """)

        @Flag(name: .long, help: "Also open every sealed value and run SQLite's full integrity_check.")
        var deep = false

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            // Every row read and checked: off the cooperative pool (rule 8), bar and all.
            let report = try await OpenedVault.with(global, credentials) { opened in
                try await BlockingWork.run { [vault = opened.vault] in
                    let bar = ProgressBar("Verifying")
                    defer { bar.finish() }
                    return try vault.maintenance.verify(depth: deep ? .deep : .rows) { bar.update($0.completed, of: $0.total) }
                }
            }
            if output.json {
                print(JSONValue.verification(report).rendered, terminator: "")
            } else {
                let check = report.depth == .deep ? "integrity_check" : "quick_check"
                print(report.databaseProblems.isEmpty ? "SQLite \(check): ok" : "SQLite \(check): FAILED")
                report.databaseProblems.forEach { print("  \($0)") }
                let opened =
                    report.depth == .deep
                    ? "\(report.sealedValuesOpened) open" : "\(report.sealedValuesOpened) data keys open, the rest not opened (--deep opens them)"
                print(
                    "Sealed values: \(opened), \(report.damaged.count) damaged"
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
