import Foundation

/// A pin of an identity service's TLS key: the SHA-256 of a certificate's DER-encoded
/// SubjectPublicKeyInfo (RFC 7469 §2.4), written `sha256/BASE64`.
///
/// A request that carries pins (``HTTPRequest/pins``) is sent only over a TLS connection whose
/// validated certificate chain holds at least one of them; otherwise nothing is sent and the
/// transport throws ``TransportError/pinningFailed(host:reason:)``. Two pins (the current key
/// and the next one) let the service roll its key over.
///
/// ```swift
/// let pin = try SPKIPin("sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
/// let pins = try SPKIPin.parse(["sha256/…current…", "sha256/…next…"])
/// ```
///
/// A pin names a public key, so it is not a secret: it may be logged and shown.
public struct SPKIPin: Sendable, Hashable, CustomStringConvertible {
    /// The SHA-256 digest of the DER-encoded SubjectPublicKeyInfo (32 bytes).
    public let digest: [UInt8]

    /// `sha256/`, the only hash RFC 7469 defines.
    public static let prefix = "sha256/"

    /// Parses `sha256/BASE64`: the standard base64 alphabet with its padding, of exactly 32 bytes.
    public init(_ text: String) throws(PinError) {
        guard text.hasPrefix(Self.prefix) else {
            throw PinError(pin: text, reason: "it does not start with \(Self.prefix)")
        }
        let encoded = text.dropFirst(Self.prefix.count)
        // Data(base64Encoded:) skips nothing by default, but checks padding only loosely:
        // a 32-byte digest is exactly 44 characters with one '='.
        guard encoded.utf8.count == 44, let bytes = Data(base64Encoded: String(encoded)) else {
            throw PinError(pin: text, reason: "its value is not the standard base64 of 32 bytes")
        }
        try self.init(digest: Array(bytes))
    }

    /// A pin from a digest computed elsewhere.
    public init(digest: [UInt8]) throws(PinError) {
        guard digest.count == 32 else {
            throw PinError(pin: "sha256 of \(digest.count) bytes", reason: "a SHA-256 digest has 32 bytes")
        }
        self.digest = digest
    }

    /// Parses every pin, or throws for the first one that is not a pin.
    public static func parse(_ texts: [String]) throws(PinError) -> [SPKIPin] {
        var pins: [SPKIPin] = []
        for text in texts { pins.append(try SPKIPin(text)) }
        return pins
    }

    /// The canonical `sha256/BASE64` form.
    public var description: String { Self.prefix + Data(digest).base64EncodedString() }
}

/// A pin that is not `sha256/` followed by the base64 of 32 bytes. Pins are public: the
/// message names the offending text (cut to 60 characters) and the rule.
public struct PinError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text that was given.
    public var pin: String
    /// What is wrong with it.
    public var reason: String

    public init(pin: String, reason: String) {
        self.pin = pin.count > 60 ? String(pin.prefix(60)) + "…" : pin
        self.reason = reason
    }

    public var description: String {
        "the pin \(pin) is refused: \(reason). A pin is sha256/ followed by the base64 of the SHA-256 of the key's "
            + "SubjectPublicKeyInfo, e.g. `openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der "
            + "| openssl dgst -sha256 -binary | base64`"
    }
}

extension EndpointRule {
    /// Why `url` cannot be protected by pins; nil when it can (or there are none).
    ///
    /// Pins are checked against the TLS certificate chain, so a pinned endpoint must use https:
    /// plain http, even to this machine, would send the credential without any check.
    public static func pinViolation(_ url: URL, pins: [SPKIPin]) -> String? {
        guard !pins.isEmpty else { return nil }
        return url.scheme?.lowercased() == "https" ? nil : "pins are checked against a TLS certificate chain, so a pinned endpoint must use https"
    }

    /// Throws ``EndpointError`` when `url` may not receive a credential, or cannot carry `pins`.
    public static func check(_ url: URL, role: String, pins: [SPKIPin]) throws(EndpointError) {
        try check(url, role: role)
        if let reason = pinViolation(url, pins: pins) { throw EndpointError(role: role, reason: reason) }
    }
}
