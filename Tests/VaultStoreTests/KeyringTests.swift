import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultStore

/// Two threads that load the same key-derived hasher at once (verify's two halves, or the agent's
/// readers): the one kept is the first, so the thread already using it never finds it wiped.
@Suite("Keyring: a hasher loaded twice")
struct KeyringLoadedTwiceTests {
    @Test("the commitment hasher loaded second is the one wiped; the first keeps working")
    func commitmentHasher() throws {
        let test = try TestVault()
        let vault = try test.create()
        defer { vault.close() }
        let keyring = vault.core.keyring
        let root = try SymmetricKey.generate(id: 1)
        defer { root.wipe() }
        let first = try keyring.commitmentHasher ?? keyring.keepCommitmentHasher(MultisetHasher(derivedFrom: root))
        let late = try MultisetHasher(derivedFrom: root)
        let kept = keyring.keepCommitmentHasher(late)
        #expect(try kept.hash([1, 2, 3], domain: "devices") == first.hash([1, 2, 3], domain: "devices"), "the first one is kept")
        var digest = MultisetDigest()
        try first.insert([1, 2, 3], domain: "devices", into: &digest)
        #expect(throws: CryptoError.self, "the late one is wiped") { try late.hash([1, 2, 3], domain: "devices") }
    }
}
