import Foundation
import Testing
import VaultTestSupport

/// Key slots from the command line with no keeper at all: a key-file vault given a passphrase
/// as well, a second key file for CI, each listed, sealed again by passwd, and removed.
@Suite("key slots from the command line")
struct KeySlotCommandTests {
    @Test("a key-file vault gains a passphrase slot and a CI key file: each opens it; passwd seals both again; removing one leaves the other")
    func passphraseAndKeyFileSlots() async throws {
        var cli = try await VaultCLI.keyFileVault()
        let keyFile = try #require(cli.environment["VAULT_KEY_FILE"])
        let added = try await cli.run(["keeper", "add", "passphrase"], environment: ["VAULT_NEW_PASSPHRASE": "a slot passphrase"])
        #expect(added.status == 0 && added.stdout.contains("slot 1"), "\(added)")
        let second = try await cli.run(["keeper", "add", "passphrase"], environment: ["VAULT_NEW_PASSPHRASE": "another one"])
        #expect(second.status == 64 && second.stderr.contains("a vault has one"), "a vault has one passphrase: \(second)")
        let ciKey = cli.file("ci.key")
        #expect(try await cli.run(["keeper", "add", "key-file", ciKey.path]).status == 0)
        cli.environment["VAULT_KEY_FILE"] = nil

        #expect(try await cli.run(["accounts", "list"], environment: ["VAULT_PASSPHRASE": "a slot passphrase"]).status == 0)
        #expect(try await cli.run(["accounts", "list", "--key-file", ciKey.path]).status == 0)
        let wrong = try await cli.run(["accounts", "list"], environment: ["VAULT_PASSPHRASE": "not it"])
        #expect(wrong.status == 77 && wrong.stderr.contains("slot 2 (\(ciKey.path))"), "the other ways in are named: \(wrong)")
        let listed = try await cli.run(["keeper", "list", "--json"])
        let slots = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(slots.map { $0["kind"] as? String } == ["key", "passphrase", "key"], "\(listed)")

        // passwd is given slot 0 (the key file) and reads each slot's key: the passphrase asked by name.
        let next = cli.file("next.key")
        let changed = try await cli.run(
            ["passwd", "--key-file", keyFile, "--new-key-file", next.path, "--keep-keys"], environment: ["VAULT_SLOT_PASSPHRASE": "a slot passphrase"])
        #expect(changed.status == 0 && changed.stdout.contains("Sealed key slots 1, 2 again"), "\(changed)")
        #expect(try await cli.run(["accounts", "list", "--key-file", keyFile]).status == 77)
        #expect(try await cli.run(["accounts", "list", "--key-file", next.path]).status == 0)
        #expect(try await cli.run(["accounts", "list"], environment: ["VAULT_PASSPHRASE": "a slot passphrase"]).status == 0)
        #expect(try await cli.run(["accounts", "list", "--key-file", ciKey.path]).status == 0)

        // Opened through the CI key's own slot, removing it is refused; through slot 0 it goes.
        let refused = try await cli.run(["keeper", "remove", "2", "--key-file", ciKey.path])
        #expect(refused.status == 64 && refused.stderr.contains("itself"), "\(refused)")
        let removed = try await cli.run(["keeper", "remove", "2", "--key-file", next.path])
        #expect(removed.status == 0 && removed.stdout.contains("opens nothing now"), "\(removed)")
        #expect(try await cli.run(["accounts", "list", "--key-file", ciKey.path]).status == 77)
        #expect(try await cli.run(["accounts", "list"], environment: ["VAULT_PASSPHRASE": "a slot passphrase"]).status == 0)
        let zero = try await cli.run(["keeper", "remove", "0", "--key-file", next.path])
        #expect(zero.status == 67, "slot 0 is changed, not removed: \(zero)")
    }
}
