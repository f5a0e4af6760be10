import Foundation

/// base64url without padding (RFC 4648 §5), as JWS, PKCE and the vault's session exports write
/// it: the one encoder and decoder of the library.
///
/// ```swift
/// let verifier = Base64URL.encode(try Random.bytes(32))
/// let payload = Base64URL.decode(jwt.split(separator: ".")[1])      // nil unless base64url
/// let key = Base64URL.decodeCanonical(text)                         // nil unless the one encoding
/// ```
public enum Base64URL {
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var text: [UInt8] = []
        append(bytes, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends the encoding of `bytes` to `text` (a JWS being put together, say): no string
    /// made on the way.
    public static func append(_ bytes: some Sequence<UInt8>, to text: inout [UInt8]) {
        // Contiguous bytes (an array, a key's buffer) are read in place: no copy is left behind.
        if bytes.withContiguousStorageIfAvailable({ append(contiguous: $0, to: &text) }) != nil { return }
        let input = Array(bytes)
        input.withUnsafeBufferPointer { append(contiguous: $0, to: &text) }
    }

    private static func append(contiguous input: UnsafeBufferPointer<UInt8>, to text: inout [UInt8]) {
        text.reserveCapacity(text.count + (input.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= input.count {
            let group = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
            text.append(alphabet[Int(group >> 18 & 63)])
            text.append(alphabet[Int(group >> 12 & 63)])
            text.append(alphabet[Int(group >> 6 & 63)])
            text.append(alphabet[Int(group & 63)])
            index += 3
        }
        switch input.count - index {
        case 1:
            let group = UInt32(input[index]) << 16
            text.append(alphabet[Int(group >> 18 & 63)])
            text.append(alphabet[Int(group >> 12 & 63)])
        case 2:
            let group = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8
            text.append(alphabet[Int(group >> 18 & 63)])
            text.append(alphabet[Int(group >> 12 & 63)])
            text.append(alphabet[Int(group >> 6 & 63)])
        default:
            break
        }
    }

    /// Decodes the canonical base64url `text` straight into `output` (a key's guarded buffer:
    /// no other copy of the bytes is made); the count written, or nil when `text` is not the
    /// canonical encoding of at most `output.count` bytes.
    public static func decode(_ text: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableRawBufferPointer) -> Int? {
        guard text.count % 4 != 1 else { return nil }
        let count = text.count / 4 * 3 + max(0, text.count % 4 - 1)
        guard count <= output.count else { return nil }
        var written = 0
        var group: UInt32 = 0
        var filled = 0
        for character in text {
            guard let value = sextet(character) else { return nil }
            group = group << 6 | UInt32(value)
            filled += 1
            if filled == 4 {
                output[written] = UInt8(truncatingIfNeeded: group >> 16)
                output[written + 1] = UInt8(truncatingIfNeeded: group >> 8)
                output[written + 2] = UInt8(truncatingIfNeeded: group)
                written += 3
                (group, filled) = (0, 0)
            }
        }
        switch filled {
        case 2:
            guard group & 0x0F == 0 else { return nil }  // unused bits set: not canonical
            output[written] = UInt8(truncatingIfNeeded: group >> 4)
            written += 1
        case 3:
            guard group & 0x03 == 0 else { return nil }
            output[written] = UInt8(truncatingIfNeeded: group >> 10)
            output[written + 1] = UInt8(truncatingIfNeeded: group >> 2)
            written += 2
        default:
            break
        }
        group = 0
        return written
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }

    /// RFC 4648 §5's alphabet, by value.
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The bytes of `text`; nil when it holds anything but the base64url alphabet (padding
    /// included) or has a length no encoding has.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        guard text.utf8.count % 4 != 1, isAlphabet(text) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }

    /// The same, accepting only the canonical encoding of some bytes: not empty, and no unused
    /// bits set (two texts for one value are refused).
    public static func decodeCanonical(_ text: some StringProtocol) -> [UInt8]? {
        guard !text.isEmpty, let bytes = decode(text), encode(bytes) == String(text) else { return nil }
        return bytes
    }

    /// Whether `text` holds only the base64url alphabet (`A`–`Z`, `a`–`z`, `0`–`9`, `-`, `_`).
    public static func isAlphabet(_ text: some StringProtocol) -> Bool {
        text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
    }
}
