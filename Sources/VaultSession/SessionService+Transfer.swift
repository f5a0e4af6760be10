import Foundation
import Logging
import VaultCrypto
import VaultOAuth
import VaultStore

/// What to export, to whom, and how.
public struct SessionExportRequest: Sendable {
    /// The account (nil: the active one).
    public var account: AccountID?
    public var recipient: SessionRecipient
    /// nil: `SessionTransferMode.move` when the account has a refresh token, else
    /// `SessionTransferMode.accessOnly`.
    public var mode: SessionTransferMode?
    /// How long the blob can be imported (at most a day).
    public var lifetime: Duration
    /// The exporting machine's name, shown by the importing vault (nil: none).
    public var host: String?

    public init(
        account: AccountID? = nil, recipient: SessionRecipient, mode: SessionTransferMode? = nil,
        lifetime: Duration = .seconds(600), host: String? = ProcessInfo.processInfo.hostName
    ) {
        self.account = account
        self.recipient = recipient
        self.mode = mode
        self.lifetime = lifetime
        self.host = host
    }
}

/// What an export did.
public struct SessionExportReport: Sendable {
    public var transfer: SessionTransferRecord
    /// The session the export ended here (`SessionTransferMode.move`); nil otherwise.
    public var endedSession: SessionRecord?
}

/// What an import stored.
public struct SessionImportReport: Sendable {
    public var account: Account
    public var transfer: SessionTransferRecord
    /// The vault had the account: its tokens were replaced and its old session ended.
    public var replacedExisting: Bool
    public var hasRefreshToken: Bool
    public var session: SessionRecord
    /// The exporting machine's name, as the blob claims it.
    public var senderHost: String?
    /// Credential-helper hosts the blob named that another account here already has (not set).
    public var skippedHosts: [String]
}

extension SessionService {
    /// This vault's recipient key (``SessionRecipient``): give it to a vault that exports a
    /// session to this one. Derived from the vault key, so `vault rotate-key` replaces it.
    public func recipient() async throws -> SessionRecipient {
        let vault = self.vault
        return try await vaultCall {
            let pair = try vault.transfers.recipientKey()
            defer { pair.wipe() }
            return SessionRecipient(publicKey: pair.publicKey)
        }
    }

    /// Seals the account's session to `request.recipient` and hands the armored blob to
    /// `deliver` (write it out there). Only once `deliver` returned is the export recorded and,
    /// for `SessionTransferMode.move`, the grant let go of: the tokens wiped and the session
    /// ended (`exported`) in one transaction, so the refresh token never has two holders. If
    /// `deliver` throws, nothing changed.
    ///
    /// The refresh lease is held from reading the tokens to letting go, so no other process
    /// rotates the refresh token in between. Refused for a session that is not active (a locked
    /// one: unlock it first) with the same errors as ``validAccessToken(for:)``.
    ///
    /// ```swift
    /// let report = try await session.exportSession(SessionExportRequest(recipient: recipient)) { blob in
    ///     FileHandle.standardOutput.write(Data((blob + "\n").utf8))
    /// }
    /// ```
    @discardableResult
    public func exportSession(
        _ request: SessionExportRequest,
        deliver: @Sendable (String) async throws -> Void
    ) async throws -> SessionExportReport {
        guard request.lifetime > .zero, request.lifetime <= .seconds(86_400) else {
            throw SessionTransferError(.malformed, "an export lasts more than no time and at most a day")
        }
        guard let id = try await accountOrActive(request.account) else { throw SessionError.noActiveAccount }
        // Judged (and refreshed when due) first: a locked or ended session is refused with its
        // own error (a locked one's keys are gone: nothing sealed opens before this), and the
        // recipient starts from a fresh access token.
        _ = try await validAccessToken(for: id)
        if let account = try await vaultCall({ [vault] in try vault.accounts.find(id) }), account.hasDPoPKey {
            throw SessionTransferError(
                .notTransferable,
                "account \(id)'s tokens are bound to a DPoP key this vault keeps: a bound refresh token is useless without it, and the key does not travel; sign the account in on the other machine"
            )
        }
        if let account = try await vaultCall({ [vault] in try vault.accounts.find(id) }), account.grant == .clientCredentials {
            throw SessionTransferError(
                .notTransferable,
                "account \(id) is a client's (client credentials): there is no user's session or refresh token to hand over, and its credentials stay in this vault; sign the client in on the other machine with its own credentials"
            )
        }
        let ours = try await recipient()
        guard ours != request.recipient else {
            throw SessionTransferError(.wrongRecipient, "that is this vault's own recipient key; pass the importing vault's")
        }
        let transferID = Digest.hex(try Random.bytes(16))
        let holder = "\(holderID)-export-\(transferID.prefix(8))"
        let vault = self.vault
        let lease = configuration.leaseDuration
        let snapshot = try await vaultCall { try vault.transfers.beginExport(of: id, holder: holder, leaseDuration: lease) }
        // Held until the export lets go: no other process rotates the refresh token meanwhile,
        // however long writing the blob takes.
        let renewal = renewLeaseWhileRefreshing(id, holder: holder)
        defer { renewal.cancel() }
        let mode = request.mode ?? (snapshot.tokens.tokens.refreshToken == nil ? .accessOnly : .move)
        let sealed: String
        let record: SessionTransferRecord
        let senderVault = ours.fingerprint
        do {
            let now = Date(millisecondsSince1970: self.now().millisecondsSince1970)
            let expiresAt = now.addingTimeInterval(request.lifetime.timeInterval)
            record = SessionTransferRecord(
                id: transferID, direction: .export, mode: mode, account: id, at: now,
                expiresAt: expiresAt, peer: request.recipient.fingerprint)
            sealed = try Self.seal(
                snapshot, mode: mode, record: record, recipient: request.recipient,
                sender: SessionPayload.Sender(host: request.host, vault: senderVault))
            try await deliver(sealed)
        } catch {
            try? await vaultCall { try vault.transfers.abandonExport(of: id, holder: holder) }
            throw error
        }
        renewal.cancel()
        let ended: SessionRecord?
        do {
            // The export's end of the session and its event, in one transaction.
            let recorded = recording { (ended: SessionRecord?) in ended.map { [(.stateChanged(id, .expired(.exported)), $0)] } ?? [] }
            ended = try await vaultCall { [holderID] in
                try vault.transfers.finishExport(snapshot, holder: holder, transfer: record, eventOrigin: holderID, recording: recorded)
            }
        } catch {
            try? await vaultCall { try vault.transfers.abandonExport(of: id, holder: holder) }
            if let refusal = error as? SessionTransferError { throw refusal }
            throw SessionTransferError(
                .unfinished,
                "the export was written, but this vault could not record it"
                    + (mode == .move ? " or let go of the grant" : "") + " (\(error)): do not import it; export again")
        }
        logger.info("exported a session", metadata: ["account": "\(id)", "mode": "\(mode.rawValue)", "transfer": "\(transferID)"])
        if ended != nil {
            broker.cache = nil
            announce([.stateChanged(id, .expired(.exported))])
        }
        try await settle()
        return SessionExportReport(transfer: record, endedSession: ended)
    }

    /// Opens an armored export sealed to this vault and stores its session: the account (added,
    /// or the one of that issuer and subject), its tokens and policy, and a session that keeps
    /// its original start, authentication time and absolute deadline. Refused with
    /// `SessionTransferError` (nothing stored) when it is not an export, was sealed to another
    /// vault, was changed, expired (or its session did), or was imported here before.
    @discardableResult
    public func importSession(_ armored: String) async throws -> SessionImportReport {
        guard armored.utf8.count <= SessionArmor.maximumLength else {
            throw SessionTransferError(.malformed, "not a session export: longer than \(SessionArmor.maximumLength) bytes")
        }
        let text = SessionArmor.trimmed(armored)
        guard text.hasPrefix(SessionArmor.prefix),
            let bytes = Base64URL.decodeCanonical(String(text.dropFirst(SessionArmor.prefix.count))),
            bytes.count > SessionArmor.headerLength + RecipientKeyPair.sealOverhead
        else {
            throw SessionTransferError(.malformed, "not a session export (one line starting with \(SessionArmor.prefix))")
        }
        guard bytes[0] == SessionArmor.version else {
            throw SessionTransferError(.malformed, "this export has format version \(bytes[0]), which this build does not read")
        }
        let vault = self.vault
        let hint = Array(bytes[1..<SessionArmor.headerLength])
        let box = Array(bytes[SessionArmor.headerLength...])
        var opened = try await vaultCall { () throws -> (json: [UInt8]?, ours: SessionRecipient) in
            let pair = try vault.transfers.recipientKey()
            defer { pair.wipe() }
            let ours = SessionRecipient(publicKey: pair.publicKey)
            guard hint == ours.hint else { return (nil, ours) }
            do {
                return (try pair.open(box), ours)
            } catch {
                throw SessionTransferError(.tampered, "this export does not open with this vault's recipient key: it was changed after it was sealed")
            }
        }
        let ours = opened.ours
        guard var json = opened.json else {
            throw SessionTransferError(
                .wrongRecipient,
                "this export is sealed to another vault (recipient \(Digest.hex(hint))), not to this one "
                    + "(\(ours.fingerprint)); ask for one sealed to this vault's recipient key")
        }
        opened.json = nil  // `json` is now the plaintext's only reference: zeroing it zeroes the plaintext
        let decoded: SessionPayload? = json.withUnsafeMutableBytes { buffer in
            // Decoded in place (no copy of the tokens left behind), then zeroed.
            defer { SecureBytes.zero(buffer) }
            guard let base = buffer.baseAddress else { return nil }
            return try? SessionPayload.decoder().decode(SessionPayload.self, from: Data(bytesNoCopy: base, count: buffer.count, deallocator: .none))
        }
        SecureBytes.zero(&json)
        guard let payload = decoded else {
            throw SessionTransferError(.malformed, "the export opened but does not hold a session this build reads")
        }
        let imported: SessionImport
        do {
            imported = try importable(payload, ours: ours)
        } catch let refusal as SessionTransferError {
            throw refusal
        } catch {
            throw SessionTransferError(.malformed, "the export holds settings this vault refuses: \(error)")
        }
        // The import and its events (as a sign-in's), in one transaction.
        let recorded = recording { (record: SessionImportRecord) in Self.signInEvents(record.signIn).map { ($0, nil) } }
        let record = try await vaultCall { [holderID] in try vault.transfers.importSession(imported, eventOrigin: holderID, recording: recorded) }
        let signIn = record.signIn
        let id = signIn.account.id
        timeouts.forgetWarning(for: id)
        broker.cache = nil
        logger.info("imported a session", metadata: ["account": "\(id)", "mode": "\(payload.mode.rawValue)", "transfer": "\(payload.id)"])
        announce(Self.signInEvents(signIn))
        if let replaced = signIn.replacedTokens, replaced.refreshToken != imported.tokens.refreshToken {
            await revokeReplaced(replaced, of: signIn.account)
        }
        try await settle()
        return SessionImportReport(
            account: signIn.account, transfer: imported.transfer, replacedExisting: signIn.replacedExisting,
            hasRefreshToken: imported.tokens.refreshToken != nil, session: signIn.session,
            senderHost: payload.from.host, skippedHosts: record.skippedHosts)
    }

    // MARK: Pieces

    /// The payload of `snapshot`, as JSON sealed to `recipient` and armored.
    static func seal(
        _ snapshot: SessionSnapshot, mode: SessionTransferMode, record: SessionTransferRecord,
        recipient: SessionRecipient, sender: SessionPayload.Sender
    ) throws -> String {
        let account = snapshot.account
        let tokens = snapshot.tokens.tokens
        let whole = mode == .move
        let payload = SessionPayload(
            format: SessionPayload.format, id: record.id, createdAt: record.at.millisecondsSince1970,
            expiresAt: record.expiresAt.millisecondsSince1970, recipient: recipient.description, mode: mode, from: sender,
            account: SessionPayload.AccountPart(
                issuer: account.issuer, subject: account.subject, subjectSource: account.subjectSource, kind: account.kind,
                label: account.label, email: account.email, tokenEndpoint: account.client.tokenEndpoint.absoluteString,
                revocationEndpoint: account.client.revocationEndpoint?.absoluteString, clientId: account.client.clientID,
                clientAuth: account.client.authentication, clientSecret: whole ? snapshot.clientSecret : nil,
                scopes: account.client.scopes, pins: account.client.pins, providerMetadata: account.providerMetadata,
                credentialHosts: account.credentialHosts, credentialUsername: account.credentialUsername),
            policy: SessionPayload.PolicyPart(snapshot.policy),
            session: SessionPayload.SessionPart(
                startedAt: snapshot.session.startedAt.millisecondsSince1970,
                authTime: snapshot.session.authTime?.millisecondsSince1970,
                absoluteDeadline: snapshot.session.absoluteDeadline?.millisecondsSince1970),
            tokens: SessionPayload.TokensPart(
                accessToken: tokens.accessToken, refreshToken: whole ? tokens.refreshToken : nil, idToken: whole ? tokens.idToken : nil,
                tokenType: tokens.tokenType, expiresAt: tokens.accessTokenExpiresAt?.millisecondsSince1970, scopes: tokens.scopes))
        var encoded = try SessionPayload.encoder().encode(payload)
        defer { encoded.withUnsafeMutableBytes { SecureBytes.zero($0) } }
        var json = [UInt8](encoded)
        defer { SecureBytes.zero(&json) }
        let box = try RecipientKeyPair.seal(json, to: recipient.publicKey)
        return SessionArmor.prefix + Base64URL.encode([SessionArmor.version] + recipient.hint + box)
    }

    /// Checks an opened payload against this vault, its clock and the endpoint rules, and
    /// turns it into what the vault stores.
    func importable(_ payload: SessionPayload, ours: SessionRecipient) throws -> SessionImport {
        guard payload.format == SessionPayload.format else {
            throw SessionTransferError(.malformed, "the export holds format \(payload.format), which this build does not read")
        }
        guard payload.recipient == ours.description else {
            throw SessionTransferError(.tampered, "the export names another recipient inside than outside: it was changed after it was made")
        }
        func hex(_ text: String, _ count: Int) -> Bool {
            text.utf8.count == count && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
        }
        guard hex(payload.id, 32), hex(payload.from.vault, 16), (payload.from.host?.utf8.count ?? 0) <= 255 else {
            throw SessionTransferError(.malformed, "the export's id, sender or host is not in the form an export has")
        }
        let now = self.now()
        // Every time and duration in a range real ones have (years 2000 to 2200, ten years at
        // most): nothing out of it reaches date arithmetic.
        let times = [
            payload.createdAt, payload.expiresAt, payload.session.startedAt, payload.session.authTime,
            payload.session.absoluteDeadline, payload.tokens.expiresAt,
        ].compactMap { $0 }
        let durations = [
            payload.policy.idleTimeoutMs, payload.policy.warningMs, payload.policy.absoluteLifetimeMs,
            payload.policy.backgroundTimeoutMs,
        ].compactMap { $0 }
        guard times.allSatisfy({ (946_684_800_000...7_258_118_400_000).contains($0) }),
            durations.allSatisfy({ (0...315_360_000_000).contains($0) }), (0...1000).contains(payload.policy.maxExtensions)
        else {
            throw SessionTransferError(.malformed, "the export holds a time or duration out of any real range")
        }
        let created = Date(millisecondsSince1970: payload.createdAt)
        let expires = Date(millisecondsSince1970: payload.expiresAt)
        // A few minutes of skew between the two machines' clocks, no more: the day-long bound
        // on a blob's life holds whatever its maker claims.
        let skew: TimeInterval = 300
        guard expires > created, expires.timeIntervalSince(created) <= 86_400, created.timeIntervalSince(now) <= skew,
            Date(millisecondsSince1970: payload.session.startedAt).timeIntervalSince(now) <= skew
        else {
            throw SessionTransferError(.malformed, "the export's times do not add up (made in the future, or living longer than a day)")
        }
        guard now < expires else {
            throw SessionTransferError(
                .expired, "this export expired at \(expires.messageText); ask for a new one (an export is valid for 10 minutes)")
        }
        let absolute = payload.session.absoluteDeadline.map(Date.init(millisecondsSince1970:))
        if let absolute, absolute <= now {
            throw SessionTransferError(.expired, "the session this export carries reached its absolute deadline at \(absolute.messageText); sign in again")
        }
        let accessExpiry = payload.tokens.expiresAt.map(Date.init(millisecondsSince1970:))
        if payload.tokens.refreshToken == nil, let accessExpiry, accessExpiry <= now {
            throw SessionTransferError(.expired, "the access token this export carries expired at \(accessExpiry.messageText) and it has no refresh token")
        }
        let part = payload.account
        guard let tokenEndpoint = URL(string: part.tokenEndpoint) else {
            throw SessionTransferError(.malformed, "the export's token endpoint is not a URL")
        }
        let revocation = try part.revocationEndpoint.map { text -> URL in
            guard let url = URL(string: text) else { throw SessionTransferError(.malformed, "the export's revocation endpoint is not a URL") }
            return url
        }
        var account = NewAccount(
            issuer: part.issuer, subject: part.subject, label: part.label, email: part.email,
            client: OAuthClientSettings(
                tokenEndpoint: tokenEndpoint, revocationEndpoint: revocation, clientID: part.clientId,
                authentication: part.clientAuth, scopes: part.scopes, pins: part.pins),
            clientSecret: part.clientSecret, providerMetadata: part.providerMetadata, subjectSource: part.subjectSource, kind: part.kind)
        // The same rules as a sign-in: no credential to plain http off this machine, pins well formed.
        account.client.pins = try checkedPins(of: account.client)
        let policy = payload.policy.policy
        try policy.validate()
        let transfer = SessionTransferRecord(
            id: payload.id, direction: .import, mode: payload.mode, account: AccountID(rawValue: ""),
            at: Date(millisecondsSince1970: now.millisecondsSince1970), expiresAt: expires,
            peer: payload.from.vault)
        return SessionImport(
            account: account, credentialHosts: part.credentialHosts, credentialUsername: part.credentialUsername,
            tokens: TokenSet(
                accessToken: payload.tokens.accessToken, refreshToken: payload.tokens.refreshToken,
                idToken: payload.tokens.idToken, tokenType: payload.tokens.tokenType,
                accessTokenExpiresAt: accessExpiry, scopes: payload.tokens.scopes),
            policy: policy, startedAt: Date(millisecondsSince1970: payload.session.startedAt),
            authTime: payload.session.authTime.map(Date.init(millisecondsSince1970:)), absoluteDeadline: absolute,
            transfer: transfer,
            origin: AccountOrigin(
                transfer: payload.id, importedAt: transfer.at, mode: payload.mode, host: payload.from.host,
                vault: payload.from.vault))
    }
}
