import Foundation
import VaultCrypto
import VaultSession
import VaultStore

// The `--json` shapes, documented in the README ("The vault command"). Keys are snake_case,
// times ISO 8601 UTC, absent values null. No shape holds a token, secret or passphrase:
// tokens appear only as {"present": …, "expires_at": …}.

extension JSONValue {
    static func account(
        _ account: Account, active: Bool, status: SessionSummary, tokens: TokenMetadata?,
        session: SessionRecord?, policy: SessionPolicy?
    ) -> JSONValue {
        [
            "id": .string(account.id.rawValue),
            "issuer": .string(account.issuer),
            "subject": .string(account.subject),
            "label": .text(account.label),
            "email": .text(account.email),
            "kind": .string(account.kind.rawValue),
            "subject_source": .text(account.subjectSource?.rawValue),
            "upgraded_to": .text(account.upgradedTo?.rawValue),
            "credential_hosts": .strings(account.credentialHosts),
            "credential_username": .text(account.credentialUsername),
            "origin": account.origin.map { origin in
                [
                    "kind": "imported", "transfer": .string(origin.transfer), "imported_at": .date(origin.importedAt),
                    "mode": .string(origin.mode.rawValue), "host": .text(origin.host), "vault": .string(origin.vault),
                ] as JSONValue
            } ?? .null,
            "notification_retention": account.notificationRetention.map { retention in
                ["days": .number(retention.days), "count": .number(retention.count)] as JSONValue
            } ?? .null,
            "active": .bool(active),
            "status": .string(status.state),
            "status_reason": .text(status.reason),
            "client": client(account.client),
            "has_client_secret": .bool(account.hasClientSecret),
            "has_client_signing_key": .bool(account.hasClientSigningKey),
            "dpop_bound": .bool(account.hasDPoPKey),
            "grant": .string(account.grant.rawValue),
            "created_at": .date(account.createdAt),
            "tokens": tokens.map(self.tokens) ?? .null,
            "session": session.map(self.session) ?? .null,
            "policy": policy.map(self.policy) ?? .null,
        ]
    }

    static func client(_ client: OAuthClientSettings) -> JSONValue {
        [
            "token_endpoint": .string(client.tokenEndpoint.absoluteString),
            "revocation_endpoint": .text(client.revocationEndpoint?.absoluteString),
            "client_id": .string(client.clientID),
            "authentication": .string(client.authentication.rawValue),
            "scopes": .strings(client.scopes),
            "pins": .strings(client.pins),
            "redirect_uri": .text(client.redirectURI),
            "ca_file": .text(client.caFile),
        ]
    }

    static func tokens(_ tokens: TokenMetadata) -> JSONValue {
        [
            "access_token": ["present": true, "expires_at": .date(tokens.accessTokenExpiresAt)],
            "refresh_token": ["present": .bool(tokens.hasRefreshToken)],
            "id_token": ["present": .bool(tokens.hasIDToken)],
            "token_type": .string(tokens.tokenType),
            "scopes": .strings(tokens.scopes),
            "generation": .int(tokens.generation),
            "updated_at": .date(tokens.updatedAt),
        ]
    }

    static func session(_ session: SessionRecord) -> JSONValue {
        [
            "id": .int(session.id),
            "account_id": .string(session.account.rawValue),
            "state": .string(session.state.rawValue),
            "end_reason": .text(session.endReason),
            "started_at": .date(session.startedAt),
            "last_activity_at": .date(session.lastActivityAt),
            "idle_deadline": .date(session.idleDeadline),
            "absolute_deadline": .date(session.absoluteDeadline),
            "extensions_used": .number(session.extensionsUsed),
            "background_entered_at": .date(session.backgroundEnteredAt),
            "ended_at": .date(session.endedAt),
            "authenticated_at": .date(session.lastAuthentication),
        ]
    }

    static func policy(_ policy: SessionPolicy) -> JSONValue {
        [
            "idle_timeout_seconds": .number(policy.idleTimeout.map { $0.components.seconds }),
            "warning_seconds": .int(policy.warningBefore.components.seconds),
            "max_extensions": .number(policy.maxExtensions),
            "absolute_lifetime_seconds": .number(policy.absoluteLifetime.map { $0.components.seconds }),
            "background_timeout_seconds": .number(policy.backgroundTimeout.map { $0.components.seconds }),
            "idle_action": .string(policy.idleAction.rawValue),
            "activity": .string(policy.activity.rawValue),
            "sensitive_cap_seconds": .number(policy.sensitiveActionCap.map { $0.components.seconds }),
            "refresh_lifetime_seconds": .number(policy.refreshTokenLifetime.map { $0.components.seconds }),
        ]
    }

    /// A device with its name (the name is omitted from `export`).
    static func device(_ device: DeviceRegistration, thisDevice: String) -> JSONValue {
        var shape = deviceFields(
            id: device.id, account: device.account, deviceID: device.deviceID, name: .text(device.name),
            platform: device.platform, status: device.status, method: device.activationMethod,
            reason: device.statusReason, created: device.createdAt, updated: device.updatedAt,
            lastActivity: device.lastActivityAt, thisDevice: thisDevice)
        if case .object(var fields) = shape, let approval = device.pendingApproval {
            fields.append(
                (
                    "approval_request",
                    .object([
                        ("notification", .string(approval.notification)), ("requested_at", .date(approval.requestedAt)),
                        ("deadline", .date(approval.deadline)),
                    ])
                ))
            shape = .object(fields)
        }
        return shape
    }

    static func device(_ device: DeviceMetadata, thisDevice: String) -> JSONValue {
        deviceFields(
            id: device.id, account: device.account, deviceID: device.deviceID, name: nil,
            platform: device.platform, status: device.status, method: device.activationMethod,
            reason: device.statusReason, created: device.createdAt, updated: device.updatedAt,
            lastActivity: device.lastActivityAt, thisDevice: thisDevice)
    }

    private static func deviceFields(
        id: String, account: AccountID, deviceID: String, name: JSONValue?, platform: String,
        status: DeviceStatus, method: ActivationMethod?, reason: String?, created: Date,
        updated: Date, lastActivity: Date?, thisDevice: String
    ) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("id", .string(id)), ("account_id", .string(account.rawValue)), ("device_id", .string(deviceID)),
        ]
        if let name { fields.append(("name", name)) }
        fields += [
            ("this_device", .bool(deviceID == thisDevice)),
            ("platform", .string(platform)), ("status", .string(status.rawValue)),
            ("activation_method", .text(method?.rawValue)), ("status_reason", .text(reason)),
            ("created_at", .date(created)), ("updated_at", .date(updated)), ("last_activity_at", .date(lastActivity)),
        ]
        return .object(fields)
    }

    static func notification(_ n: NotificationRecord) -> JSONValue {
        [
            "uuid": .string(n.uuid),
            "account_id": .string(n.account.rawValue),
            "subject": .string(n.subject),
            "message": .string(n.message),
            "actions": .array(
                n.actions.map {
                    ["label": .string($0.label), "action": .string($0.action), "auth_level": .text($0.authLevel)]
                }),
            "created_at": .date(n.createdAt),
            "expires_at": .date(n.expiresAt),
            "status": .string(n.status.rawValue),
            "action_taken": .text(n.actionTaken),
            "answered_at": .date(n.answeredAt),
            "answered_by_device": .text(n.answeredByDevice),
        ]
    }

    /// A key slot: `slot`, `kind` (passphrase | key), `keeper`, `label`, `created_at`, and `here`
    /// when given (where its key is found on this machine).
    static func keySlot(_ slot: KeySlot, here: String? = nil) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("slot", .number(slot.id)), ("kind", .string(slot.kind == .passphrase ? "passphrase" : "key")),
            ("keeper", slot.keeper.map(JSONValue.string) ?? .null), ("label", .string(slot.label)), ("created_at", .date(slot.createdAt)),
        ]
        if let here { members.append(("here", .string(here))) }
        return .object(members)
    }

    static func status(_ facts: VaultInspection) -> JSONValue {
        let credential: JSONValue
        switch facts.unlockMethod {
        case .keyFile:
            credential = ["kind": "key_file", "kdf": .null]
        case .passphrase(let cost):
            credential = [
                "kind": "passphrase",
                "kdf": [
                    "algorithm": "argon2id13",
                    "level": .text(KDFLevel(cost)?.rawValue),
                    "ops_limit": .number(cost.opsLimit),
                    "mem_limit_bytes": .number(cost.memLimitBytes),
                ],
            ]
        }
        func counts<Key: RawRepresentable & CaseIterable>(_ values: [Key: Int], _: Key.Type) -> JSONValue where Key.RawValue == String {
            .object([("total", .number(values.values.reduce(0, +)))] + Key.allCases.map { ($0.rawValue, .number(values[$0] ?? 0)) })
        }
        return [
            "path": .string(facts.url.path),
            "file_size_bytes": .int(facts.fileSize),
            "wal_size_bytes": .int(facts.walSize),
            "schema_version": .number(facts.schemaVersion),
            "latest_schema_version": .number(facts.latestSchemaVersion),
            "pending_migrations": .array(facts.pendingMigrations.map(step)),
            "credential": credential,
            "key_slots": .array(facts.keySlots.map { keySlot($0) }),
            "vault_id": .string(facts.vaultID),
            "device_id": .string(facts.deviceID),
            "created_at": .date(facts.createdAt),
            "accounts": .number(facts.counts.accounts),
            "active_account_id": .text(facts.activeAccount?.rawValue),
            "sessions": counts(facts.counts.sessions, SessionState.self),
            "devices": counts(facts.counts.devices, DeviceStatus.self),
            "notifications": counts(facts.counts.notifications, NotificationStatus.self),
            "last_integrity_check": facts.lastIntegrityCheck.map {
                ["checked_at": .date($0.checkedAt), "ok": .bool($0.passed)]
            } ?? .null,
            "expiring_refresh_tokens": .array(
                facts.expiringRefreshTokens.sorted { $0.value < $1.value }.map { ["account": .string($0.key.rawValue), "expires_at": .date($0.value)] }),
        ]
    }

    static func step(_ step: SchemaStep) -> JSONValue {
        ["version": .number(step.version), "name": .string(step.name)]
    }

    /// Damaged values or rows by table, row, column and reason (`verify`, `repair`).
    static func damaged(_ values: [DamagedValue]) -> JSONValue {
        .array(values.map { ["table": .string($0.table), "row": .string($0.row), "column": .string($0.column), "reason": .string($0.reason)] })
    }

    static func verification(_ report: IntegrityReport) -> JSONValue {
        [
            "ok": .bool(report.passed),
            "depth": .string(report.depth.rawValue),
            "checked_at": .date(report.checkedAt),
            "database_problems": .strings(report.databaseProblems),
            "sealed_values_opened": .number(report.sealedValuesOpened),
            "rows_authenticated": .number(report.rowsAuthenticated),
            "sealed_values_skipped": .number(report.sealedValuesSkipped),
            "damaged": damaged(report.damaged),
        ]
    }

    /// `vault export --redacted --json`: everything but sealed values.
    static func export(_ metadata: VaultMetadata, generatedAt: Date) -> JSONValue {
        let thisDevice = metadata.inspection.deviceID
        return [
            "format": "credentialvault-redacted-export",
            "format_version": 1,
            "generated_at": .date(generatedAt),
            "vault": status(metadata.inspection),
            "accounts": .array(
                metadata.accounts.map { account in
                    [
                        "id": .string(account.id.rawValue),
                        "issuer": .string(account.issuer),
                        "subject": .string(account.subject),
                        "active": .bool(account.id == metadata.inspection.activeAccount),
                        "has_label": .bool(account.hasLabel),
                        "has_email": .bool(account.hasEmail),
                        "has_client_secret": .bool(account.hasClientSecret),
                        "client": client(account.client),
                        "created_at": .date(account.createdAt),
                        "tokens": account.tokens.map(tokens) ?? .null,
                        "policy": account.policy.map(policy) ?? .null,
                        "refresh": account.refresh.map { refresh in
                            [
                                "lease_held": .bool(refresh.leaseHolder != nil),
                                "failures": .number(refresh.failures),
                                "next_attempt_at": .date(refresh.nextAttemptAt),
                                "last_failure": .text(refresh.lastFailure),
                                "last_failure_at": .date(refresh.lastFailureAt),
                                "interrupted_refreshes": .number(refresh.interruptedRefreshes),
                            ]
                        } ?? .null,
                    ]
                }),
            "sessions": .array(metadata.sessions.map(session)),
            "devices": .array(metadata.devices.map { device($0, thisDevice: thisDevice) }),
            "notifications": .array(
                metadata.notifications.map { n in
                    [
                        "uuid": .string(n.uuid),
                        "account_id": .string(n.account.rawValue),
                        "created_at": .date(n.createdAt),
                        "expires_at": .date(n.expiresAt),
                        "status": .string(n.status.rawValue),
                        "answered": .bool(n.answered),
                        "answered_at": .date(n.answeredAt),
                        "answered_by_device": .text(n.answeredByDevice),
                    ]
                }),
        ]
    }
}

/// Where an account's session stands, as the commands show it.
struct SessionSummary {
    /// `active`, `locked`, `expired` or `signed_out`.
    var state: String
    var reason: String?

    init(_ status: SessionStatus) {
        switch status {
        case .active: (state, reason) = ("active", nil)
        case .signedOut: (state, reason) = ("signed_out", nil)
        case .locked(let why): (state, reason) = ("locked", why.rawValue)
        case .expired(let why): (state, reason) = ("expired", why.rawValue)
        }
    }

    var text: String { reason.map { "\(state) (\($0))" } ?? state }
}
