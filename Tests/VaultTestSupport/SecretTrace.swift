import Foundation

/// Finds a secret in text however a server may have re-encoded it, without knowing which
/// encoder it used: the text is decoded every way a server could have encoded the secret,
/// and each decoding is searched for the secret's bytes.
///
/// - as it is;
/// - percent-decoded leniently (any `%XY`, either case of hex, with `+` read as a space and
///   as itself), so every form or URL encoder's output is caught;
/// - every run of base64 or base64url characters decoded from each of its four starting
///   offsets, searched for the secret less two bytes at each end (those may share a base64
///   group with what surrounds the secret).
///
/// ```swift
/// #expect(SecretTrace.find(refreshToken, in: stderr) == nil, "the refresh token leaked")
/// ```
public enum SecretTrace {
    /// How `secret` was found in `text` (`raw`, `percent-decoded`, `base64`), or nil. Never the secret.
    public static func find(_ secret: String, in text: String) -> String? {
        let needle = Array(secret.utf8)
        guard !needle.isEmpty else { return nil }
        let bytes = Array(text.utf8)
        if contains(bytes, needle) { return "raw" }
        if contains(percentDecoded(bytes, plusIsSpace: true), needle)
            || contains(percentDecoded(bytes, plusIsSpace: false), needle)
        {
            return "percent-decoded"
        }
        let inner = needle.count > 6 ? Array(needle.dropFirst(2).dropLast(2)) : needle
        for run in base64Runs(bytes) {
            for offset in 0..<4 where run.count - offset >= 4 {
                let window = Array(run[offset...])
                let whole = window.count - window.count % 4
                if let decoded = Data(base64Encoded: Data(window[..<whole]), options: [.ignoreUnknownCharacters]),
                    contains(Array(decoded), inner)
                {
                    return "base64"
                }
            }
        }
        return nil
    }

    /// The first of `secrets` found in `text` and how, as `"secret #2 (base64)"`: never the value.
    public static func firstFound(of secrets: [String], in text: String) -> String? {
        for (index, secret) in secrets.enumerated() {
            if let how = find(secret, in: text) { return "secret #\(index) (\(how))" }
        }
        return nil
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }

    static func percentDecoded(_ bytes: [UInt8], plusIsSpace: Bool) -> [UInt8] {
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var result: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2]) {
                result.append(high << 4 | low)
                index += 3
            } else {
                result.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                index += 1
            }
        }
        return result
    }

    /// Maximal runs of base64 / base64url characters, base64url turned into base64.
    static func base64Runs(_ bytes: [UInt8]) -> [[UInt8]] {
        var runs: [[UInt8]] = []
        var current: [UInt8] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                current.append(byte)
            case UInt8(ascii: "-"): current.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): current.append(UInt8(ascii: "/"))
            default:
                if current.count >= 4 { runs.append(current) }
                current = []
            }
        }
        if current.count >= 4 { runs.append(current) }
        return runs
    }
}
