import Foundation

/// Placeholder for a secret value: says how long it was and nothing else.
package func redacted(_ secret: String) -> String {
    "<redacted \(secret.utf8.count) bytes>"
}

/// The secrets one request carried, in every spelling a server could send them back in, and
/// the rule that makes the server's text safe to keep.
///
/// A server that echoes its input (in `error_description`, say) does not echo it as it was
/// given to the client: it echoes the request body (form-encoded, `+` for a space, RFC 6749
/// appendix B), a URL it built (percent-encoded, `%20`), a log line with the `Authorization`
/// header (the HTTP Basic credential, base64 of the form-encoded `client_id:client_secret`,
/// RFC 6749 §2.3.1), or a base64 dump of the body, where the secret starts at any byte offset.
/// ``apply(to:limit:)`` replaces each of these spellings, whole even where the text is cut,
/// so no piece of a secret is left at the cut either.
///
/// ```swift
/// let redaction = Redaction(secrets: [refreshToken, clientSecret])
/// let safe = redaction.apply(to: serverDescription)   // "… token <redacted> is revoked"
/// ```
public struct Redaction: Sendable, Hashable {
    /// What every spelling of a secret becomes.
    public static let placeholder = "<redacted>"

    /// Every spelling to replace, longest first: where several start at the same place, the
    /// longest is replaced.
    let spellings: [Spelling]
    /// The length of the longest spelling, in Unicode scalars.
    let longest: Int

    struct Spelling: Sendable, Hashable {
        var text: String
        /// Percent-encoded spellings match with either case of hex digit (`%2f`, `%2F`).
        var caseInsensitive: Bool

        /// The scalars compared, ASCII letters lower-cased when `caseInsensitive`.
        var scalars: [Unicode.Scalar] {
            text.unicodeScalars.map { caseInsensitive ? Spelling.folded($0) : $0 }
        }

        static func folded(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
            (0x41...0x5A).contains(scalar.value) ? Unicode.Scalar(UInt8(scalar.value + 0x20)) : scalar
        }
    }

    /// The spellings of every non-empty secret in `secrets`.
    public init(secrets: [String]) {
        var seen = Set<Spelling>()
        var all: [Spelling] = []
        for secret in secrets where !secret.isEmpty {
            for spelling in Self.spellings(of: secret) where !spelling.text.isEmpty && seen.insert(spelling).inserted {
                all.append(spelling)
            }
        }
        spellings = all.sorted { $0.text.unicodeScalars.count > $1.text.unicodeScalars.count }
        longest = spellings.first?.text.unicodeScalars.count ?? 0
    }

    /// No secret at all: ``apply(to:limit:)`` only drops control characters and shortens.
    public static let none = Redaction(secrets: [])

    /// Server-supplied `text` made safe to show or store: control characters dropped, every
    /// spelling of every secret replaced by ``placeholder``, then cut to `limit` Unicode
    /// scalars (and `…` added).
    ///
    /// The text is read from the start, and at each place the longest spelling that starts
    /// there is replaced whole, even when it runs past the cut. Only as much text as the
    /// result can need is read (`limit` times the longest spelling), so a server's megabyte
    /// of text costs no more than its first few kilobytes.
    public func apply(to text: String, limit: Int = 512) -> String {
        let visible = text.unicodeScalars.lazy.filter { $0.value >= 0x20 && $0.value != 0x7F }
        let (product, overflow) = max(limit, 0).addingReportingOverflow(1).partialValue
            .multipliedReportingOverflow(by: max(longest, 1))
        let needed = overflow || limit == .max ? Int.max : product
        let input = Array(visible.prefix(needed))
        let caseFolded = input.map(Spelling.folded)
        let patterns = spellings.map { ($0.scalars, $0.caseInsensitive) }
        let placeholder = Array(Self.placeholder.unicodeScalars)

        var output = String.UnicodeScalarView()
        var written = 0
        var index = 0
        while index < input.count, written <= limit {
            let match = patterns.first { pattern, caseInsensitive in
                guard index + pattern.count <= input.count else { return false }
                return (caseInsensitive ? caseFolded : input)[index..<(index + pattern.count)].elementsEqual(pattern)
            }
            if let (pattern, _) = match {
                output.append(contentsOf: placeholder)
                written += placeholder.count
                index += pattern.count
            } else {
                output.append(input[index])
                written += 1
                index += 1
            }
        }
        var result = String(output)
        let more = index < input.count || input.count == needed
        if written > limit || more {
            result = String(String.UnicodeScalarView(result.unicodeScalars.prefix(limit))) + "…"
        }
        return result
    }

    // MARK: - Spellings

    /// The shortest part of a base64 text that is still matched on its own: shorter pieces of
    /// a short secret would redact innocent words.
    static let minimumFragmentLength = 8

    /// How `secret` may come back from a server:
    /// - as it is (and in either canonical Unicode form), and as it is inside a JSON string
    ///   quoted twice (`\/`, `\"`, `\\`);
    /// - form-encoded (`+`) and percent-encoded (`%20`), hex digits of either case;
    /// - base64 and base64url, with and without padding;
    /// - inside a longer base64 or base64url text (a dump of the whole request body): the
    ///   characters that depend on the secret's bytes alone, for each of the three offsets
    ///   the secret can start at within a 3-byte group.
    static func spellings(of secret: String) -> [Spelling] {
        var result: [Spelling] = []
        func add(_ text: String, caseInsensitive: Bool = false) {
            result.append(Spelling(text: text, caseInsensitive: caseInsensitive))
        }
        add(secret)
        // A server that normalises Unicode may send back the other canonical form.
        add(secret.precomposedStringWithCanonicalMapping)
        add(secret.decomposedStringWithCanonicalMapping)
        let visible = String(String.UnicodeScalarView(secret.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
        if visible != secret, visible.count >= minimumFragmentLength { add(visible) }
        let jsonQuoted = secret.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "/", with: "\\/")
        add(jsonQuoted)

        let formEncoded = FormURLEncoding.encode(secret)
        add(formEncoded, caseInsensitive: true)
        // Form encoding leaves no literal '+' but the ones that were spaces.
        add(formEncoded.replacingOccurrences(of: "+", with: "%20"), caseInsensitive: true)

        let bytes = Array(secret.utf8)
        let standard = Data(bytes).base64EncodedString()
        for padded in [standard, standard.trimmingCharacters(in: CharacterSet(charactersIn: "="))] {
            add(padded)
            add(base64URL(padded))
        }
        for fragment in base64Fragments(of: bytes) where fragment.utf8.count >= minimumFragmentLength {
            add(fragment)
            add(base64URL(fragment))
        }
        return result
    }

    /// The base64 characters that depend only on `bytes`, wherever they sit in a longer text:
    /// for an offset of 0, 1 or 2 bytes into a 3-byte group, the encoding of the bytes behind
    /// that many filler bytes, less the characters that mix filler bits (the first 0, 2 or 3)
    /// and, when the bytes end inside a group, the last one (it mixes in what follows).
    static func base64Fragments(of bytes: [UInt8]) -> [String] {
        let mixedAtStart = [0, 2, 3]
        return (0..<3).map { offset -> String in
            let padded = Data(Array(repeating: 0, count: offset) + bytes).base64EncodedString()
            var characters = Array(padded.trimmingCharacters(in: CharacterSet(charactersIn: "=")))
            characters.removeFirst(min(mixedAtStart[offset], characters.count))
            if (offset + bytes.count) % 3 != 0, !characters.isEmpty { characters.removeLast() }
            return String(characters)
        }
    }

    /// base64url (RFC 4648 §5) of a base64 text: `-` for `+`, `_` for `/`.
    static func base64URL(_ base64: String) -> String {
        base64.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }
}

extension Redaction: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// How many spellings it replaces, never one of them.
    public var description: String { "Redaction(\(spellings.count) spellings)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// A mirror without children, so `dump(redaction)` cannot print a secret.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
