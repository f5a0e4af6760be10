import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Migrate: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate",
            abstract: "Bring the vault to this tool's schema: show the steps, back up, apply.",
            discussion: """
                Lists the pending schema migrations; without --dry-run it then checks the \
                passphrase, copies the vault next to itself (vault.db.vN-TIMESTAMP.bak, mode 0600) \
                and applies each step in its own transaction. A failed step rolls back alone and \
                the vault stays at the version before it (exit code 70). The other commands refuse \
                an outdated vault with exit code 81 until it is migrated.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @Flag(help: "Only show what would be done; change nothing and ask for no passphrase.")
        var dryRun = false

        func run() async throws {
            let url = global.url
            let options = global.storeOptions()
            let facts = try await BlockingWork.run { try Vault.inspect(at: url, options: options) }
            guard !dryRun, !facts.pendingMigrations.isEmpty else {
                return report(
                    from: facts.schemaVersion, to: facts.pendingMigrations.isEmpty ? facts.schemaVersion : facts.latestSchemaVersion,
                    steps: facts.pendingMigrations, backup: nil, applied: false)
            }
            if !output.json {
                print("Schema \(facts.schemaVersion) → \(facts.latestSchemaVersion): " + facts.pendingMigrations.map(\.description).joined(separator: ", "))
            }
            // The credential (a keeper asked over D-Bus, the TPM, a prompt), the key derivation
            // and the migration itself: off the cooperative pool.
            let credentials = self.credentials
            let result = try await BlockingWork.run {
                let credential = try credentials.credential(for: facts)
                let bar = ProgressBar("Migrating")
                let result = try Vault.migrate(at: url, credential: credential, options: options) {
                    bar.update($0.completed, of: $0.total)
                }
                bar.finish()
                return result
            }
            report(from: result.fromVersion, to: result.toVersion, steps: result.applied, backup: result.backup, applied: !result.applied.isEmpty)
        }

        private func report(from: Int, to: Int, steps: [SchemaStep], backup: URL?, applied: Bool) {
            if output.json {
                let json: JSONValue = [
                    "dry_run": .bool(dryRun),
                    "from_version": .number(from),
                    "to_version": .number(to),
                    "migrations": .array(steps.map(JSONValue.step)),
                    "applied": .bool(applied),
                    "backup": .text(backup?.path),
                ]
                print(json.rendered, terminator: "")
                return
            }
            guard !steps.isEmpty else {
                print("Nothing to migrate: the vault is at schema \(from), the latest this tool knows.")
                return
            }
            if dryRun {
                print("Schema \(from) → \(to). Pending migrations:")
                steps.forEach { print("  \($0)") }
                print("Run `vault migrate` to back up and apply them.")
                return
            }
            print(backup.map { "Backed up to \($0.path) (mode 0600)." } ?? "No backup: the vault held no account.")
            steps.forEach { print("Applied \($0).") }
            print("The vault is at schema \(to).")
        }
    }
}
