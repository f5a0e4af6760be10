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
        let input = Array(bytes)
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
