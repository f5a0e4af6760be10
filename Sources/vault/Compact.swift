import ArgumentParser
import Foundation
import VaultStore

extension VaultCommand {
    struct Compact: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "compact",
            abstract: "Fold the write-ahead log into the vault file and empty it.",
            discussion: """
                Runs a SQLite checkpoint (TRUNCATE). With secure_delete, once it completes nothing \
                removed (an account, a token replaced by a refresh) is left in the vault file or \
                its -wal. Another process reading the vault keeps it from completing: `accounts \
                remove` then says so, and this command retries, waiting up to the busy timeout \
                (10 s) for the reader. Exits 75 when a reader still blocks it. Needs no passphrase.
                """)

        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let outcome = try Vault.compact(at: global.url, options: global.storeOptions())
            switch outcome {
            case .completed:
                print("Compacted \(global.url.path): everything is in the vault file and the write-ahead log is empty.")
            case .blockedByReader:
                throw CommandFailure(
                    .busy,
                    "\(global.url.path) is still being read by another process, so the write-ahead log could not be emptied (\(outcome)); run `vault compact` again once it has finished"
                )
            case .failed(let message):
                throw CommandFailure(.storage, "\(global.url.path): \(message)")
            }
        }
    }
}
