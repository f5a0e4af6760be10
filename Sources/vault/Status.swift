import ArgumentParser
import Foundation
import VaultCrypto
import VaultStore

extension VaultCommand {
    struct Status: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show what the vault holds, without unlocking it.",
            discussion: """
                Shows the file and its size, the schema version (and pending migrations), how the \
                vault is unlocked, and how many accounts, sessions, devices and notifications it \
                holds, by state, with the active account and the last integrity check, and the key \
                slots the file names (`vault agent status` says which one unlocked a running agent; \
                `vault keeper list` where each key is found here), and the refresh tokens an agent \
                warned are expiring. Needs no passphrase: all of it is plain metadata anyone holding the file can read.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let facts = try Vault.inspect(at: global.url, options: global.storeOptions())
            if output.json {
                print(JSONValue.status(facts).rendered, terminator: "")
                return
            }
            print(Self.describe(facts))
        }

        static func describe(_ facts: VaultInspection) -> String {
            let schema =
                facts.pendingMigrations.isEmpty
                ? "\(facts.schemaVersion) (up to date)"
                : "\(facts.schemaVersion); this tool writes \(facts.latestSchemaVersion): run `vault migrate`"
            let unlock: String
            switch facts.unlockMethod {
            case .keyFile: unlock = "key file"
            case .passphrase(let cost):
                unlock = "passphrase, Argon2id \(KDFLevel(cost)?.rawValue ?? "custom") (\(cost.opsLimit) passes, \(cost.memLimitBytes / 1_048_576) MiB)"
            }
            func byState<Key: RawRepresentable & CaseIterable>(_ values: [Key: Int], _: Key.Type) -> String where Key.RawValue == String {
                let total = values.values.reduce(0, +)
                let parts = Key.allCases.compactMap { key in values[key].map { "\($0) \(key.rawValue.replacingOccurrences(of: "_", with: " "))" } }
                return parts.isEmpty ? "\(total)" : "\(total) (\(parts.joined(separator: ", ")))"
            }
            let check =
                facts.lastIntegrityCheck.map {
                    "\(Format.iso8601($0.checkedAt)), \($0.passed ? "passed" : "FAILED")"
                } ?? "never (run `vault verify`)"
            var rows: [(String, String)] = [
                ("Vault", facts.url.path),
                ("Size", Format.bytes(facts.fileSize) + (facts.walSize > 0 ? " + \(Format.bytes(facts.walSize)) write-ahead log" : "")),
                ("Schema", schema),
                ("Unlocked by", unlock),
                ("Key slots", facts.keySlots.count <= 1 ? "none but slot 0" : facts.keySlots.map(\.description).joined(separator: ", ")),
                ("Created", Format.iso8601(facts.createdAt)),
                ("Accounts", "\(facts.counts.accounts)"),
                ("Active account", facts.activeAccount?.rawValue ?? "none"),
                ("Sessions", byState(facts.counts.sessions, SessionState.self)),
                ("Devices", byState(facts.counts.devices, DeviceStatus.self)),
                ("Notifications", byState(facts.counts.notifications, NotificationStatus.self)),
                ("Integrity check", check),
            ]
            // Told by an agent's grant watch (`agent start --warn-refresh-expiry`).
            for (account, expiry) in facts.expiringRefreshTokens.sorted(by: { $0.value < $1.value }) {
                rows.append(("Warning", "the refresh token of account \(account.rawValue) expires \(Format.iso8601(expiry)): sign in again before then"))
            }
            return rows.map { "\($0.0.padding(toLength: 16, withPad: " ", startingAt: 0))\($0.1)" }.joined(separator: "\n")
        }
    }
}
