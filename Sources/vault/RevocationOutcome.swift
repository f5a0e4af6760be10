import VaultSession

/// How a sign-out's revocation is told: a warning on standard error whenever the grant may still
/// be alive at the provider (never a silent success), and `revoked`/`reason` in `--json`.
extension SignOutReport.Revocation {
    var revoked: Bool {
        if case .revoked = self { return true }
        return false
    }

    /// Why not revoked; nil when revoked.
    var reason: String? {
        switch self {
        case .revoked: nil
        case .notAttempted(let why): why
        case .failed(let why): "the identity service did not revoke it: \(why)"
        }
    }

    /// The `--json` members: `revoked`, and `reason` when not.
    var jsonMembers: [(String, JSONValue)] {
        [("revoked", .bool(revoked)), ("reason", reason.map { .string(Terminal.printable($0)) } ?? .null)]
    }

    /// Warns on standard error unless the grant was revoked, or the user asked for no revocation.
    func warnIfAlive(_ whose: String) {
        switch self {
        case .revoked, .notAttempted("not requested"):
            return
        case .notAttempted(let why):
            Terminal.printError(
                "vault: warning: the sign-in of \(whose) was not revoked at the identity service (\(Terminal.printable(why))); it may accept the refresh token until it expires: revoke it there if you can"
            )
        case .failed(let why):
            Terminal.printError(
                "vault: warning: the identity service did not revoke the refresh token of \(whose) (\(Terminal.printable(why))); it may accept it until it expires: revoke the sign-in there if you can"
            )
        }
    }
}

extension RevocationSupport {
    /// The sign-in's word on it, for `vault login`: nil when sign-outs can revoke.
    var warning: String? {
        switch self {
        case .available: nil
        case .noEndpoint:
            "vault: warning: \(self); `vault accounts remove` and `vault sessions end` will only forget it here (give --revocation-endpoint if the provider has one)"
        case .clientNotListed:
            "vault: warning: \(self); each sign-out will say whether it did"
        }
    }

    var json: JSONValue {
        ["available": .bool(self == .available), "reason": self == .available ? .null : .string(description)]
    }
}
