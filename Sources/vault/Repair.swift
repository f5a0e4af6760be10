import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Repair: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "repair",
            abstract: "Make the vault commit to its rows as they are (--accept-current), after a crash or a bug.",
            discussion: """
                The vault's header records, for every row the session layer reads and for every \
                collection of devices, notifications, events and transfers, what the vault last \
                wrote; `vault verify` names what disagrees (a row deleted, put back from an older \
                copy, or written after the header). When the file as it is must be kept, \
                --accept-current checks every row against its MAC (a row changed without the key \
                is never accepted), authenticates every row again and commits to them, and records \
                a `repair_accepted` event listing what disagreed. It cannot tell a crash's \
                leftovers from a deletion on purpose: read what `vault verify` reports first. The \
                other way out is to restore a backup (`vault backup` makes one while the vault is \
                in use): copy it over the vault file while no process has the vault open.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @Flag(help: "Accept the rows as they are now (what `vault verify` reports becomes what the vault commits to).")
        var acceptCurrent = false

        func validate() throws {
            guard acceptCurrent else {
                throw ValidationError("say what to repair: --accept-current (read `vault verify` first; or restore a backup instead)")
            }
        }

        func run() async throws {
            // Every row checked and every commitment made again: off the cooperative pool (rule 8).
            let report = try await OpenedVault.with(global, credentials) { opened in
                try await BlockingWork.run { [vault = opened.vault] in try vault.maintenance.acceptCurrentState(origin: "vault repair") }
            }
            if output.json {
                let json: JSONValue = [
                    "ok": .bool(true), "accepted": .damaged(report.accepted), "rows_authenticated": .number(report.rowsAuthenticated),
                    "write_counter": .number(Int(report.writeCounter)),
                ]
                print(json.rendered, terminator: "")
            } else {
                if report.accepted.isEmpty {
                    print("Nothing disagreed: the vault already committed to every row.")
                } else {
                    print("Accepted as it is now (\(report.accepted.count)):")
                    report.accepted.forEach { print("  \($0)") }
                }
                print("Rows: \(report.rowsAuthenticated) authenticated again at write \(report.writeCounter); recorded as a repair_accepted event")
            }
        }
    }
}
