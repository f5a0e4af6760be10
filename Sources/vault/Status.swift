import ArgumentParser
import Foundation
import VaultCrypto
import VaultSession
import VaultStore

extension VaultCommand {
    struct Status: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show what the vault holds, without unlocking it.",
            discussion: """
                Shows the file and its size, the schema version (and pending migrations), how the \
                vault is unlocked, and how many accounts, sessions, devices and notifications it \
                holds, by state (each account's in the seeds' vocabulary: active_signed_in, \
                active_device_pending, locked, expired, inactive), with the active account and the \
                last integrity check, and the key \
                slots the file names (`vault agent status` says which one unlocked a running agent; \
                `vault keeper list` where each key is found here), and the refresh tokens an agent \
                warned are expiring. Needs no passphrase: all of it is plain metadata anyone holding the file can read.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            // The accounts' states need their sessions and policies too; a file whose rows this
            // build cannot read as metadata (a schema it only inspects) is shown without them.
            let metadata = try? Vault.metadata(at: global.url, options: global.storeOptions(), includeNotifications: false)
            let facts = try metadata?.inspection ?? Vault.inspect(at: global.url, options: global.storeOptions())
            let states = metadata?.accountStates(now: CommandTime.wall.now())
            if output.json {
                let counts = states.map { states in
                    JSONValue.object(AccountState.names.map { name in (name, .number(states.values.filter { $0.name == name }.count)) })
                }
                let active = facts.activeAccount.flatMap { states?[$0] }
                print(
                    JSONValue.status(facts).adding("account_states", counts ?? .null).adding("active_account_state", .text(active?.name)).rendered,
                    terminator: "")
                return
            }
            print(Self.describe(facts, states: states))
        }

        static func describe(_ facts: VaultInspection, states: [AccountID: AccountState]? = nil) -> String {
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
                ("Active account", facts.activeAccount.map { "\($0.rawValue)\(states?[$0].map { " (\($0))" } ?? "")" } ?? "none"),
                ("Account states", states.map(Self.describe) ?? "not read"),
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

        /// "2 active signed in, 1 locked": the states held, in ``AccountState/names`` order.
        static func describe(_ states: [AccountID: AccountState]) -> String {
            let parts = AccountState.names.compactMap { name -> String? in
                let count = states.values.filter { $0.name == name }.count
                return count == 0 ? nil : "\(count) \(name.replacingOccurrences(of: "_", with: " "))"
            }
            return parts.isEmpty ? "none" : parts.joined(separator: ", ")
        }
    }
}
