import ArgumentParser
import Foundation
import VaultStore

extension VaultCommand {
    struct Backup: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "backup",
            abstract: "Copy the vault to PATH while it is in use (mode 0600).",
            discussion: """
                Uses SQLite's online backup: a consistent copy even while other processes read \
                and write the vault. The copy is created with mode 0600, opens with the same \
                passphrase or key file, and is never written over. Needs no passphrase.

                Keep in mind: a backup taken before an account is removed still holds that \
                account, readable with the passphrase of the time.
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: ArgumentHelp("Where to write the copy; must not exist.", valueName: "path"))
        var destination: String

        func run() async throws {
            let source = global.url
            let target = URL(fileURLWithPath: (destination as NSString).expandingTildeInPath)
            // A typo in the path must not become a new directory holding a copy of the vault.
            let parent = target.deletingLastPathComponent()
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: parent.path, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw CommandFailure(.usage, "directory \(parent.path) does not exist; create it first (`mkdir -m 700 \(parent.path)`)")
            }
            let bar = ProgressBar("Backing up")
            try Vault.backup(of: source, to: target, options: global.storeOptions()) { bar.update($0.completed, of: $0.total) }
            bar.finish()
            print("Backed up \(source.path) to \(target.path) (mode 0600).")
        }
    }
}
