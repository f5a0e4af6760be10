/// A client secret whose descriptions and mirror never show the value.
///
/// ```swift
/// let secret = ClientSecret("s3cr3t")
/// print(secret) // <redacted 6 bytes>
/// ```
public struct ClientSecret: Sendable, Hashable {
    /// The secret itself; read it only to authenticate.
    public let value: String

    /// Wraps a secret value.
    public init(_ value: String) {
        self.value = value
    }
}

extension ClientSecret: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `<redacted N bytes>`.
    public var description: String { redacted(value) }
    /// `<redacted N bytes>`.
    public var debugDescription: String { description }
    /// A mirror without children, so `dump(secret)` cannot print it.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
