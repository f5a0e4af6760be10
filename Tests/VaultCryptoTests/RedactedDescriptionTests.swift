import Testing
import VaultCrypto
import VaultTestSupport

/// Keys and secret bytes never show their bytes, or where they live, in any rendering.
@Suite struct RedactedDescriptionTests {
    /// The ways the 32 bytes could be spelled out: hex and as Swift prints an array.
    static func spellings(of bytes: [UInt8]) -> [String] {
        let hex = bytes.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
        return [hex, hex.uppercased(), "\(bytes)", bytes.prefix(4).map(String.init).joined(separator: "\n")]
    }

    @Test("SecureBytes renders as its size only")
    func secureBytes() throws {
        let bytes = (0..<32).map { UInt8(200 - $0) }
        let secret = try SecureBytes(copying: bytes)
        for text in Renderings.of(secret) {
            for spelling in Self.spellings(of: bytes) { #expect(!text.contains(spelling)) }
            #expect(!text.contains("0x"), "no address of the guarded memory: \(text)")
        }
        #expect("\(secret)" == "SecureBytes(32 bytes)")
        secret.wipe()
        #expect("\(secret)" == "SecureBytes(wiped)")
    }

    @Test("a SymmetricKey renders as its id only, a KeyEncryptionKey as nothing at all")
    func keys() throws {
        let bytes = (0..<32).map { UInt8(100 + $0) }
        let kek = try KeyEncryptionKey.fromKeyFile(SecureBytes(copying: bytes))
        let key = try SymmetricKey.generate(id: 7)
        for text in Renderings.of(kek) + Renderings.of(key) {
            for spelling in Self.spellings(of: bytes) { #expect(!text.contains(spelling)) }
            #expect(!text.contains("0x"), "no address of the guarded memory: \(text)")
            #expect(!text.contains("material") && !text.contains("checkKey") && !text.contains("wrapping"))
        }
        #expect("\(key)" == "SymmetricKey(id: 7)")
    }
}
