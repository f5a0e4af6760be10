import Foundation

/// The device authorization grant's state (RFC 8628): each device code, its user code, what
/// the user decided, and the polling pace. Pure value logic: the ``DevGateway`` actor owns the
/// only instance and passes the time in.
struct DeviceGrantLedger: Sendable {
    enum Decision: Sendable, Equatable {
        case pending
        case approved(subject: String)
        case denied
        /// Tokens were issued; the device code is used up.
        case spent
    }

    struct Authorization: Sendable {
        let deviceCode: String
        /// Eight letters, without the dash.
        let userCode: String
        let clientID: String
        let scope: String
        let createdAt: Date
        var expiresAt: Date
        /// Seconds the client must wait between polls; grows by 5 with every slow_down.
        var interval: Int
        var lastPoll: Date?
        var decision: Decision = .pending

        func isExpired(at now: Date) -> Bool { now >= expiresAt }
    }

    /// The `grant_type` of a device-code token request (RFC 8628 §3.4).
    static let grantType = "urn:ietf:params:oauth:grant-type:device_code"

    /// The polling interval given to new authorizations, in seconds; 0 turns slow_down off.
    var interval = 5
    /// How long new device codes live, in seconds.
    var lifetime = 600
    private var authorizations: [String: Authorization] = [:]
    private var deviceCodes: [String: String] = [:]

    /// RFC 8628 §6.1: consonants only (no vowels, so no words; no Y), upper case.
    static let userCodeAlphabet = Array("BCDFGHJKLMNPQRSTVWXZ")

    /// Starts an authorization for `clientID`; returns it with a fresh device and user code.
    mutating func start(clientID: String, scope: String, now: Date) -> Authorization {
        var userCode: String
        repeat {
            userCode = String((0..<8).map { _ in Self.userCodeAlphabet[Int.random(in: 0..<Self.userCodeAlphabet.count)] })
        } while deviceCodes[userCode] != nil
        let authorization = Authorization(
            deviceCode: TokenMint.token(prefix: "dc_"), userCode: userCode, clientID: clientID, scope: scope,
            createdAt: now, expiresAt: now.addingTimeInterval(TimeInterval(lifetime)), interval: interval)
        authorizations[authorization.deviceCode] = authorization
        deviceCodes[userCode] = authorization.deviceCode
        return authorization
    }

    /// `BCDF-GHJK` from `BCDFGHJK`.
    static func display(_ userCode: String) -> String {
        "\(userCode.prefix(4))-\(userCode.dropFirst(4))"
    }

    /// A user code as typed: case-insensitive, dashes and spaces ignored (RFC 8628 §6.1).
    static func normalize(_ typed: String) -> String {
        String(typed.uppercased().filter { $0 != "-" && !$0.isWhitespace })
    }

    // MARK: - The user's side

    /// Records the user's approval for `subject`; false if the code is unknown, decided or expired.
    mutating func approve(userCode: String, subject: String, now: Date) -> Bool {
        decide(userCode, now: now, .approved(subject: subject))
    }

    /// Records the user's denial; false if the code is unknown, decided or expired.
    mutating func deny(userCode: String, now: Date) -> Bool {
        decide(userCode, now: now, .denied)
    }

    /// Expires the code at once; false if it is unknown or already expired or spent.
    mutating func expire(userCode: String, now: Date) -> Bool {
        guard let deviceCode = deviceCodes[Self.normalize(userCode)], var authorization = authorizations[deviceCode],
            !authorization.isExpired(at: now), authorization.decision != .spent
        else { return false }
        authorization.expiresAt = now
        authorizations[deviceCode] = authorization
        return true
    }

    /// User codes still waiting for the user, oldest first, as displayed (`BCDF-GHJK`).
    func pendingUserCodes(now: Date) -> [String] {
        authorizations.values
            .filter { $0.decision == .pending && !$0.isExpired(at: now) }
            .sorted { ($0.createdAt, $0.userCode) < ($1.createdAt, $1.userCode) }
            .map { Self.display($0.userCode) }
    }

    private mutating func decide(_ userCode: String, now: Date, _ decision: Decision) -> Bool {
        guard let deviceCode = deviceCodes[Self.normalize(userCode)], var authorization = authorizations[deviceCode],
            authorization.decision == .pending, !authorization.isExpired(at: now)
        else { return false }
        authorization.decision = decision
        authorizations[deviceCode] = authorization
        return true
    }

    // MARK: - The device's side (RFC 8628 §3.4-3.5)

    enum PollOutcome: Sendable, Equatable {
        case approved(subject: String, scope: String)
        case rejected(OAuthRejection, slowedDown: Bool)
    }

    /// One poll of the token endpoint by the authenticated `clientID`. An approved code is
    /// spent by the poll that gets the tokens.
    mutating func poll(deviceCode: String, clientID: String, now: Date) -> PollOutcome {
        guard var authorization = authorizations[deviceCode] else {
            return .rejected(.invalidGrant("unknown device_code"), slowedDown: false)
        }
        guard authorization.clientID == clientID else {
            return .rejected(.invalidGrant("the device_code was issued to another client"), slowedDown: false)
        }
        defer { authorizations[deviceCode] = authorization }
        let previousPoll = authorization.lastPoll
        authorization.lastPoll = now
        if authorization.decision == .spent {
            return .rejected(.invalidGrant("the device_code was already used"), slowedDown: false)
        }
        if authorization.isExpired(at: now) {
            return .rejected(
                OAuthRejection(status: 400, error: "expired_token", description: "the device_code has expired; start over"),
                slowedDown: false)
        }
        switch authorization.decision {
        case .pending:
            if authorization.interval > 0, let previousPoll,
                now.timeIntervalSince(previousPoll) < TimeInterval(authorization.interval)
            {
                authorization.interval += 5
                return .rejected(
                    OAuthRejection(
                        status: 400, error: "slow_down",
                        description: "polled too soon; wait \(authorization.interval) s between polls"),
                    slowedDown: true)
            }
            return .rejected(
                OAuthRejection(status: 400, error: "authorization_pending", description: "the user has not answered yet"),
                slowedDown: false)
        case .denied:
            return .rejected(
                OAuthRejection(status: 400, error: "access_denied", description: "the user denied the request"),
                slowedDown: false)
        case .approved(let subject):
            authorization.decision = .spent
            return .approved(subject: subject, scope: authorization.scope)
        case .spent:
            return .rejected(.invalidGrant("the device_code was already used"), slowedDown: false)
        }
    }
}
