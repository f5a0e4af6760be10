/// `application/x-www-form-urlencoded` as RFC 6749 Appendix B uses it.
///
/// UTF-8, then every byte outside ALPHA / DIGIT / `-` `.` `_` `~` is percent-encoded with
/// upper-case hex, except space, which becomes `+`. So ` %"&+£€` becomes `+%25%22%26%2B%C2%A3%E2%82%AC`.
package enum FormURLEncoding {
    /// Encodes one name or value.
    package static func encode(_ text: String) -> String {
        var result = [UInt8]()
        result.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                result.append(byte)
            case UInt8(ascii: " "):
                result.append(UInt8(ascii: "+"))
            default:
                result.append(UInt8(ascii: "%"))
                result.append(hexDigit(byte >> 4))
                result.append(hexDigit(byte & 0x0F))
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// Encodes name/value pairs in order, joined by `&`.
    package static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { encode($0.0) + "=" + encode($0.1) }.joined(separator: "&")
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }
}
