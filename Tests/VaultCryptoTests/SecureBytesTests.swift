import Foundation
import Testing
import VaultCrypto

/// Guarded secret bytes: readable until wiped, never after.
@Suite struct SecureBytesTests {
    @Test("bytes read back as copied, and compare in constant time")
    func readBack() throws {
        let source: [UInt8] = Array("passphrase".utf8)
        let secret = try SecureBytes(copying: source)
        #expect(secret.count == source.count)
        #expect(try secret.withUnsafeBytes { Array($0) } == source)
        #expect(try secret.constantTimeEquals(source))
        #expect(try !secret.constantTimeEquals(Array("passphrasE".utf8)))
        #expect(try !secret.constantTimeEquals(Array("passphrase!".utf8)))
        #expect(try !secret.constantTimeEquals([]))
    }

    @Test("an empty secret is usable: count 0, equal only to empty")
    func emptySecret() throws {
        let empty = try SecureBytes(copying: [])
        #expect(empty.count == 0)
        #expect(try empty.withUnsafeBytes { $0.count } == 0)
        #expect(try empty.constantTimeEquals([]))
        #expect(try !empty.constantTimeEquals([0]))
    }

    @Test("after wipe the bytes cannot be read, and wiping again is harmless")
    func wipe() throws {
        let secret = try SecureBytes.random(count: 32)
        #expect(!secret.isWiped)
        secret.wipe()
        #expect(secret.isWiped)
        let error = #expect(throws: CryptoError.self) { try secret.withUnsafeBytes { Array($0) } }
        #expect(error?.code == .keyWiped)
        #expect(throws: CryptoError.self) { try secret.constantTimeEquals([UInt8](repeating: 0, count: 32)) }
        secret.wipe()
        #expect(secret.isWiped)
    }

    @Test("an initialiser that throws leaves no secret behind and rethrows its error")
    func failingInitialiser() {
        struct Refused: Error {}
        #expect(throws: Refused.self) { try SecureBytes(count: 16) { _ in throw Refused() } }
    }

    @Test("random secrets differ")
    func randomDiffers() throws {
        let first = try SecureBytes.random(count: 32)
        let second = try SecureBytes.random(count: 32)
        let firstBytes = try first.withUnsafeBytes { Array($0) }
        #expect(try !second.constantTimeEquals(firstBytes))
    }

    @Test("concurrent readers and a wipe never crash: each read sees the bytes or keyWiped")
    func concurrentWipe() async throws {
        let secret = try SecureBytes(copying: [UInt8](repeating: 0x42, count: 64))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<200 {
                        do {
                            let bytes = try secret.withUnsafeBytes { Array($0) }
                            #expect(bytes == [UInt8](repeating: 0x42, count: 64))
                        } catch let error as CryptoError {
                            #expect(error.code == .keyWiped)
                        } catch {
                            Issue.record("unexpected \(error)")
                        }
                    }
                }
            }
            group.addTask { secret.wipe() }
        }
        #expect(secret.isWiped)
    }
}
