import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct RotateKey: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-key",
            abstract: "Replace the vault key and every account key, re-sealing every value.",
            discussion: """
                Makes a new vault key and a new data key for every account, then re-seals every \
                sealed value (tokens, secrets, labels, device names, notification texts) in \
                transactions of --batch-size rows. Safe to interrupt: the new keys are stored \
                first and every value names the key that sealed it, so at every point every value \
                opens; run the command again to resume. The passphrase or key file stays the same \
                (change it with `vault passwd`). Other processes that have the vault open must \
                unlock it again afterwards. A progress bar is drawn on a terminal.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions

        @Option(help: ArgumentHelp("Rows re-sealed per transaction.", valueName: "rows"))
        var batchSize: Int = 500

        func validate() throws {
            guard batchSize > 0 else { throw ValidationError("--batch-size must be at least 1") }
        }

        func run() async throws {
            // Every sealed value re-sealed, in batches: off the cooperative pool (rule 8).
            let report = try await OpenedVault.with(global, credentials) { opened in
                try await BlockingWork.run { [vault = opened.vault, credential = opened.credential, batchSize] in
                    let bar = ProgressBar("Re-sealing")
                    defer { bar.finish() }
                    return try vault.maintenance.rotateKeys(credential: credential, batchSize: batchSize) { progress in
                        bar.update(progress.rowsDone, of: progress.rowsTotal)
                    }
                }
            }
            if output.json {
                print(
                    JSONValue.object([
                        ("resumed", .bool(report.resumed)),
                        ("values_resealed", .int(Int64(report.valuesResealed))),
                        ("vault_key_id", .int(Int64(report.vaultKeyID))),
                    ]).rendered, terminator: "")
            } else {
                print(
                    "\(report.resumed ? "Resumed and finished" : "Finished") the key rotation: \(report.valuesResealed) value(s) re-sealed; vault key \(report.vaultKeyID)."
                )
            }
        }
    }
}
