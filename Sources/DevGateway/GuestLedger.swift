/// Guest accounts: which guests were converted into which registered subject. Pure value
/// logic, owned by the ``DevGateway`` actor.
struct GuestLedger: Sendable {
    /// Registered subject by converted guest subject.
    private(set) var conversions: [String: String] = [:]

    /// A new guest subject, `guest-` and 64 random bits in hex.
    static func newSubject() -> String { TokenMint.identifier(prefix: "guest-") }

    /// Records that `guest` became `subject`.
    mutating func recordConversion(of guest: String, into subject: String) {
        conversions[guest] = subject
    }
}
