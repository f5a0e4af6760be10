import Foundation
import Testing
import VaultCrypto

/// Sealing and opening a field: round trips, and every way a blob can be wrong.
@Suite struct SealingTests {
    static let context = SealContext(
        vaultID: Array(repeating: 0xab, count: 16), table: "tokens", column: "refresh_token",
        account: "acct-1", row: "acct-1", version: "7")

    /// Runs `body`, requires a ``CryptoError`` with `code`.
    func expectCryptoError<T>(
        _ code: CryptoError.Code, _ comment: Comment? = nil,
        sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T
    ) {
        do {
            _ = try body()
            Issue.record(
                "expected CryptoError \(code), got a value. \(comment.map(String.init(describing:)) ?? "")",
                sourceLocation: sourceLocation)
        } catch let error as CryptoError {
            #expect(error.code == code, "\(error) \(comment.map(String.init(describing:)) ?? "")", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected CryptoError \(code), got \(error)", sourceLocation: sourceLocation)
        }
    }

    static let plaintexts: [[UInt8]] = [[], [0], Array("a refresh token".utf8), [UInt8](repeating: 0x5a, count: 70_000)]

    @Test("a sealed value opens to the same bytes, including an empty one", arguments: plaintexts)
    func roundTrip(plaintext: [UInt8]) throws {
        let key = try SymmetricKey.generate(id: 3)
        let blob = try key.seal(plaintext, context: Self.context)
        #expect(blob.count == SealedBlob.minimumLength + plaintext.count)
        #expect(try key.open(blob, context: Self.context) == plaintext)
        let parsed = try SealedBlob(parsing: blob)
        #expect(parsed.version == SealedBlob.currentVersion && parsed.keyID == 3)
    }

    static let texts = ["", "a refresh token", "é ✓ 🔑", String(repeating: "z", count: 70_000)]

    @Test("text sealed in place opens as the same text, and as the same bytes", arguments: texts)
    func textRoundTrip(text: String) throws {
        let key = try SymmetricKey.generate(id: 3)
        let blob = try key.seal(text: text, context: Self.context)
        #expect(blob.count == SealedBlob.minimumLength + text.utf8.count)
        #expect(try key.openText(blob, context: Self.context) == text)
        #expect(try key.open(blob, context: Self.context) == Array(text.utf8))
        expectCryptoError(.authenticationFailed) {
            try key.openText(blob, context: SealContext(vaultID: [], table: "tokens", column: "refresh_token", row: "other"))
        }
    }

    @Test("bytes that are not UTF-8 open as no text")
    func notText() throws {
        let key = try SymmetricKey.generate(id: 3)
        let blob = try key.seal([0xff, 0xfe, 0x00], context: Self.context)
        #expect(try key.openText(blob, context: Self.context) == nil)
    }

    /// Around the ASCII fast path (eight bytes at a time, then the tail): ASCII of every length
    /// across a word, one non-ASCII or invalid byte at every position, a NUL, a cut-off sequence.
    static let textBytes: [[UInt8]] = {
        var cases: [[UInt8]] = (0...17).map { Array(repeating: UInt8(ascii: "a"), count: $0) }
        for position in 0..<17 {
            var ascii = Array(repeating: UInt8(ascii: "b"), count: 17)
            ascii.replaceSubrange(position..<(position + 1), with: Array("é".utf8))
            cases.append(ascii)
            ascii = Array(repeating: UInt8(ascii: "c"), count: 17)
            ascii[position] = 0xff
            cases.append(ascii)
            ascii[position] = 0x80
            cases.append(ascii)
        }
        cases.append(Array("nul\u{0}inside, long enough".utf8))
        cases.append(Array("cut off: ".utf8) + Array("🔑".utf8).prefix(3))
        return cases
    }()

    @Test("opened bytes are text exactly when String(validating:) says so, and the same text")
    func textAsStandardLibrary() throws {
        let key = try SymmetricKey.generate(id: 3)
        let shared = SharedSealContext(vaultID: Self.context.vaultID, table: "tokens", column: "refresh_token", account: "acct-1")
        for bytes in Self.textBytes {
            let blob = try key.seal(bytes, context: Self.context)
            let expected = String(validating: bytes, as: UTF8.self)
            #expect(try key.openText(blob, context: Self.context) == expected, "\(bytes)")
            let opened = try blob.withUnsafeBytes { try key.openText($0, sharing: shared, row: "acct-1", version: "7") }
            #expect(opened == expected, "\(bytes)")
            if let expected, let opened { #expect(Array(opened.utf8) == Array(expected.utf8)) }
        }
    }

    @Test("sealing the same value twice gives different blobs (random nonce)")
    func noncesDiffer() throws {
        let key = try SymmetricKey.generate(id: 1)
        let plaintext = Array("same value".utf8)
        let first = try key.seal(plaintext, context: Self.context)
        let second = try key.seal(plaintext, context: Self.context)
        #expect(first != second)
        #expect(try SealedBlob(parsing: first).nonce != SealedBlob(parsing: second).nonce)
    }

    @Test("the plaintext does not appear in the sealed blob")
    func plaintextIsHidden() throws {
        let key = try SymmetricKey.generate(id: 1)
        let plaintext = Array("RT-visible-secret-value".utf8)
        let blob = try key.seal(plaintext, context: Self.context)
        let windows = (0...(blob.count - plaintext.count)).map { Array(blob[$0..<($0 + plaintext.count)]) }
        #expect(!windows.contains(plaintext))
    }

    /// One field of the context changed.
    struct ContextChange: Sendable, CustomTestStringConvertible {
        var name: String
        var change: @Sendable (inout SealContext) -> Void
        var testDescription: String { name }
    }

    static let contextChanges: [ContextChange] = [
        ContextChange(name: "vault id") { $0.vaultID[0] ^= 1 },
        ContextChange(name: "shorter vault id") { $0.vaultID.removeLast() },
        ContextChange(name: "table") { $0.table = "accounts" },
        ContextChange(name: "column") { $0.column = "access_token" },
        ContextChange(name: "account") { $0.account = "acct-2" },
        ContextChange(name: "row") { $0.row = "acct-2" },
        ContextChange(name: "version") { $0.version = "8" },
        ContextChange(name: "empty version") { $0.version = "" },
        // Length prefixes: moving bytes between neighbouring fields is a different context.
        ContextChange(name: "table/column boundary") {
            $0.table = "tokensr"
            $0.column = "efresh_token"
        },
        ContextChange(name: "account/row boundary") {
            $0.account = "acct-1acct-1"
            $0.row = ""
        },
    ]

    @Test("a blob opened for any other context fails authentication", arguments: contextChanges)
    func contextBinding(change: ContextChange) throws {
        let key = try SymmetricKey.generate(id: 1)
        let blob = try key.seal(Array("bound".utf8), context: Self.context)
        var other = Self.context
        change.change(&other)
        #expect(other != Self.context)
        expectCryptoError(.authenticationFailed) { try key.open(blob, context: other) }
    }

    @Test("every single-bit change anywhere in a blob makes it fail to open")
    func everyBitFlipFails() throws {
        let key = try SymmetricKey.generate(id: 0x0102_0304)
        let blob = try key.seal(Array("flip me".utf8), context: Self.context)
        var failures = 0
        for position in blob.indices {
            for bit in 0..<8 {
                var altered = blob
                altered[position] ^= UInt8(1) << UInt8(bit)
                // The version byte is malformed, the key id names another key, the rest fails the tag.
                let expected: CryptoError.Code = position == 0 ? .malformedBlob : position < SealedBlob.headerLength ? .keyMismatch : .authenticationFailed
                do {
                    let opened = try key.open(altered, context: Self.context)
                    Issue.record("byte \(position) bit \(bit) opened to \(opened.count) bytes")
                } catch let error as CryptoError {
                    #expect(error.code == expected, "byte \(position) bit \(bit)")
                    failures += 1
                }
                // Opened in place (as the vault reads a blob SQLite holds): the same verdict.
                expectCryptoError(expected, "in place, byte \(position) bit \(bit)") {
                    try altered.withUnsafeBytes { try key.openText($0, context: Self.context) }
                }
            }
        }
        #expect(failures == blob.count * 8)
    }

    @Test("a blob sealed by another key is refused: by key id, or by authentication when ids collide")
    func otherKey() throws {
        let sealer = try SymmetricKey.generate(id: 1)
        let blob = try sealer.seal(Array("value".utf8), context: Self.context)
        expectCryptoError(.keyMismatch) { try SymmetricKey.generate(id: 2).open(blob, context: Self.context) }
        expectCryptoError(.authenticationFailed) { try SymmetricKey.generate(id: 1).open(blob, context: Self.context) }
    }

    @Test("a wiped key can neither seal nor open, in any copy of it")
    func wipedKey() throws {
        let key = try SymmetricKey.generate(id: 1)
        let copy = key
        let blob = try key.seal(Array("value".utf8), context: Self.context)
        key.wipe()
        #expect(key.isWiped && copy.isWiped)
        expectCryptoError(.keyWiped) { try copy.open(blob, context: Self.context) }
        expectCryptoError(.keyWiped) { try key.seal([1], context: Self.context) }
        expectCryptoError(.keyWiped) { try SymmetricKey.generate(id: 2).wrap(key, context: Self.context) }
        key.wipe()
        #expect(key.isWiped, "wiping twice is harmless")
    }

    @Test("a wrapped key unwraps to a key that opens what the original sealed")
    func wrapUnwrap() throws {
        let wrapping = try SymmetricKey.generate(id: 1)
        let dataKey = try SymmetricKey.generate(id: 9)
        let sealed = try dataKey.seal(Array("payload".utf8), context: Self.context)
        let wrapContext = SealContext(vaultID: Self.context.vaultID, table: "accounts", column: "wrapped_data_key", row: "a", version: "9")
        let wrapped = try wrapping.wrap(dataKey, context: wrapContext)
        let unwrapped = try wrapping.openKey(wrapped, id: 9, context: wrapContext)
        #expect(unwrapped.id == 9)
        #expect(try unwrapped.open(sealed, context: Self.context) == Array("payload".utf8))
        var elsewhere = wrapContext
        elsewhere.row = "b"
        expectCryptoError(.authenticationFailed) { try wrapping.openKey(wrapped, id: 9, context: elsewhere) }
    }

    @Test("a value opened with its table, column and account shared opens as with its whole context, and nowhere else")
    func sharedContext() throws {
        let key = try SymmetricKey.generate(id: 5)
        let context = Self.context
        for text in Self.texts {
            let blob = try key.seal(text: text, context: context)
            let shared = SharedSealContext(vaultID: context.vaultID, table: context.table, column: context.column, account: context.account)
            let opened = try blob.withUnsafeBytes { try key.openText($0, sharing: shared, row: context.row, version: context.version) }
            #expect(opened == text)
        }
        // Every part still binds: the same change that fails the whole context fails the shared one.
        let blob = try key.seal(text: "bound", context: context)
        for change in Self.contextChanges {
            var other = context
            change.change(&other)
            let shared = SharedSealContext(vaultID: other.vaultID, table: other.table, column: other.column, account: other.account)
            expectCryptoError(.authenticationFailed, "\(change.name)") {
                try blob.withUnsafeBytes { try key.openText($0, sharing: shared, row: other.row, version: other.version) }
            }
        }
        let shared = SharedSealContext(vaultID: context.vaultID, table: context.table, column: context.column, account: context.account)
        expectCryptoError(.keyMismatch) {
            try blob.withUnsafeBytes { try SymmetricKey.generate(id: 6).openText($0, sharing: shared, row: context.row, version: context.version) }
        }
        expectCryptoError(.malformedBlob) {
            try Array(blob.prefix(10)).withUnsafeBytes { try key.openText($0, sharing: shared, row: context.row, version: context.version) }
        }
    }

    // MARK: - Parsing

    @Test("inputs shorter than a sealed blob are malformed, at every length")
    func shortInputs() throws {
        let key = try SymmetricKey.generate(id: 1)
        for length in 0..<SealedBlob.minimumLength {
            var bytes = [UInt8](repeating: 0, count: length)
            if length > 0 { bytes[0] = SealedBlob.currentVersion }
            expectCryptoError(.malformedBlob, "length \(length)") { try SealedBlob(parsing: bytes) }
            expectCryptoError(.malformedBlob, "length \(length)") { try key.open(bytes, context: Self.context) }
            expectCryptoError(.malformedBlob, "in place, length \(length)") {
                try bytes.withUnsafeBytes { try key.openText($0, context: Self.context) }
            }
        }
    }

    @Test("an unknown format version is malformed")
    func unknownVersion() throws {
        let key = try SymmetricKey.generate(id: 1)
        var blob = try key.seal(Array("v".utf8), context: Self.context)
        for version: UInt8 in [0, 2, 0xff] {
            blob[0] = version
            expectCryptoError(.malformedBlob, "version \(version)") { try SealedBlob(parsing: blob) }
        }
    }

    @Test("random garbage never opens and never crashes the parser")
    func garbage() throws {
        let key = try SymmetricKey.generate(id: 1)
        for length in [SealedBlob.minimumLength, SealedBlob.minimumLength + 1, 64, 100, 1000] {
            for round in 0..<50 {
                var bytes = try Random.bytes(length)
                if round.isMultiple(of: 2) {
                    // Half of them look like version-1 blobs for this key, so they reach the AEAD.
                    bytes.replaceSubrange(0..<5, with: [SealedBlob.currentVersion, 0, 0, 0, 1])
                }
                do {
                    _ = try key.open(bytes, context: Self.context)
                    Issue.record("random bytes of length \(length) opened")
                } catch let error as CryptoError {
                    #expect([.malformedBlob, .keyMismatch, .authenticationFailed].contains(error.code))
                    if round.isMultiple(of: 2) { #expect(error.code == .authenticationFailed) }
                }
            }
        }
    }
}
