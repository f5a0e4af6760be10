import AgentWire
import Foundation

/// The agent's wire protocol and its constants.
///
/// **Version 2** (``AgentWire``, what this build's clients speak): the client opens the
/// connection with the preface `CVAGENT/2\n`, then sends request frames, each answered by one
/// frame in order, for as long as it keeps the connection (the agent closes one idle for
/// ``AgentProtocol/idleSeconds``). A frame is a 4-byte big-endian length and fields (key,
/// value), listed below; lists repeat their key; unknown keys are ignored.
///
/// ```
/// Request:  op = token | credential | unauthorized | hosts | status | lock | unlock | stop |
///           dpop_proof | hello,
///           account?, min_ttl? (seconds), protocol?, host?, path?, username?, presented?,
///           resource*, scope* (token, dpop_proof: the target; none: the account's own token),
///           method, url, nonce?, no_token? = 1 (dpop_proof: the request the proof is for),
///           passphrase? | key_file? (unlock only)
/// Answer:   ok = 1, and for a token: token, token_type, expires_at? (seconds since 1970),
///           account, scope* (as granted), username?, target_resource*, target_scope* (the
///           target served, as asked: a client asking for one checks them); for dpop_proof:
///           proof, and the token its `ath` names as above (none with no_token); for status: vault, pid, locked (0|1),
///           lock_after_seconds?, last_use?, started_at, socket, lock_reason?, unlocked_by_slot?; for hosts: hosts
///           (the count), then host, host_user per entry; for hello: version, versions*, op*
///        or ok = 0, error (the code), exit, message
///           terminal fields (a request that may meet a locked agent): tty?, term?, display?,
///           wayland_display?, dbus_session?, locale?, waits = 1
/// Interim:  ok = wait (only to a request that said `waits`: the agent is asking for the
///           passphrase through pinentry; the answer follows)
/// ```
///
/// `hello` lists the versions and operations the agent serves: a client that needs an
/// operation added later asks first, and an agent that lacks it says so (`unknown_op`) rather
/// than failing the connection. A preface of a version the agent does not speak is answered
/// with one frame `ok=0, error=unsupported_version, versions=…` and the connection is closed.
///
/// How the next features extend version 2 without a new version: each adds operations or
/// fields, and a client that needs one checks `hello` first (an older agent lacks it and says
/// `unknown_op`, never a broken connection). Tokens per resource add a `resource` field to
/// `token` (RFC 8707); DPoP added `dpop_proof` (method, URL, nonce in; the signed proof and the
/// token it names out) so the key never leaves the agent; fresh tokens for `vault exec` children use the kept
/// connection. Unlock on demand added the terminal fields: a locked agent runs pinentry on the
/// terminal or display they name (the passphrase goes from pinentry to the agent on a pipe,
/// never through this socket) and sends `ok=wait` every ``AgentProtocol/interimSeconds``
/// while the request waits for the person (only then), so the client's receive timeout keeps
/// meaning "the agent is stuck". An agent without it ignores the fields and answers `locked` at
/// once, as before; `hello` lists `feature=pinentry` when the agent has a pinentry to run. Only a change to the frame itself would be
/// version 3.
///
/// **Version 1** (JSON, still answered for clients of older builds): one request per
/// connection, one JSON object on one line (at most `AgentProtocol.maximumRequestSize` bytes,
/// newline included), answered by one JSON object on one line, then the connection closes.
///
/// ```
/// Request:  {"v": 1, "op": "token" | "credential" | "unauthorized" | "hosts" | "status" | "lock" | "unlock" | "stop",
///            "account": "<id, id prefix or subject>"?, "min_ttl": <seconds>?,
///            "protocol", "host", "path"?, "username"? (credential, unauthorized: the account whose
///            credential hosts match, the one answering as "username" when given),
///            "presented": "<token>"? (unauthorized: an API refused it; refreshed once if current;
///            absent: the current token, as docker logout names none),
///            "passphrase": "…"? | "key_file": "/path"? (unlock only)}
/// Response: {"v": 1, "ok": true, "token": {"value", "type", "expires_at" (seconds since 1970)?,
///            "account", "scopes", "username"?}?, "status": {…}?}
///        (credential with no matching host: ok, no token; hosts: "hosts": {"host[/path]": "username"})
///        or {"v": 1, "ok": false, "error": {"code", "exit", "message"}}
/// ```
///
/// `exit` is the `vault` exit code the failure maps to (79 locked, 80 ended, 69 unavailable…),
/// so a client reports it as the command would. Error codes of the protocol itself:
/// `unsupported_version`, `malformed_request`, `request_too_large`, `peer_refused` (another uid),
/// `unknown_op`. A peer of another uid is refused before anything is read.
public enum AgentProtocol {
    /// The version of the JSON-line protocol (``AgentRequest/v``); frames are version 2.
    public static let version = 1
    /// The largest request the agent reads, newline included; a longer one is refused.
    public static let maximumRequestSize = WireProtocol.maximumRequestSize
    /// The largest response a client reads.
    public static let maximumResponseSize = WireProtocol.maximumResponseSize
    /// Seconds a protocol-2 connection may stay idle between requests before the agent closes
    /// it; a request cut off half-way is dropped after ``stalledSeconds``.
    public static let idleSeconds: Int64 = 60
    /// Seconds a request may take to arrive once it has started.
    public static let stalledSeconds: Int64 = 5
    /// Seconds between interim answers (`ok=wait`) to a request that carries terminal fields,
    /// while the agent works on it (a passphrase prompt).
    public static let interimSeconds: Int64 = 2
    /// What `hello` lists as `feature` for an agent that can prompt through pinentry.
    public static let pinentryFeature = "pinentry"
    /// What `hello` lists as `feature` for an agent that serves tokens for targets (`resource`, `scope`).
    public static let targetsFeature = "targets"
}

/// One request to the agent. Its description never shows the passphrase.
public struct AgentRequest: Codable, Sendable, CustomStringConvertible {
    public enum Operation: String, Codable, Sendable, CaseIterable {
        case token, credential, unauthorized, hosts, status, lock, unlock, stop
        /// A DPoP proof (RFC 9449) signed by the agent for one request, and the token it names.
        case dpopProof = "dpop_proof"
    }

    public var v: Int
    public var op: Operation
    public var account: String?
    /// Seconds the token must stay valid (`--min-ttl`); nil: the agent's leeway.
    public var minTTL: Int?
    public var passphrase: String?
    public var keyFile: String?
    public var `protocol`: String?
    public var host: String?
    public var path: String?
    public var presented: String?
    /// The user name a credential request asked for (git's `username=`); nil: the entry's default.
    public var username: String?
    /// Where the requester can be asked for the passphrase when the agent is locked (protocol 2
    /// only); nil: nowhere (cron, `--no-prompt`), so a locked agent refuses at once.
    public var terminal: RequesterTerminal? = nil
    /// `token`: the RFC 8707 resource indicators and the scopes of the token asked for (protocol
    /// 2 only); both empty: the account's own token.
    public var resources: [String] = []
    public var scopes: [String] = []
    /// `dpop_proof`: the HTTP method and URL of the request the proof is for, the server's last
    /// `DPoP-Nonce`, and whether the proof names no token (no `ath`) (protocol 2 only).
    public var method: String?
    public var url: String?
    public var nonce: String?
    public var withoutToken = false
    /// `token`: record a sensitive action first (`vault token --sensitive`; protocol 2 only).
    /// An agent that predates it ignores the field: the answer then lacks
    /// ``AgentResponse/sensitiveRecorded`` and the client refuses the token.
    public var sensitive = false

    public init(_ op: Operation, account: String? = nil, minTTL: Int? = nil, passphrase: String? = nil, keyFile: String? = nil) {
        self.v = AgentProtocol.version
        self.op = op
        self.account = account
        self.minTTL = minTTL
        self.passphrase = passphrase
        self.keyFile = keyFile
    }

    enum CodingKeys: String, CodingKey {
        case v, op, account, passphrase, host, path, presented, username
        case `protocol`
        case minTTL = "min_ttl"
        case keyFile = "key_file"
    }

    public var description: String {
        "AgentRequest(op: \(op.rawValue), account: \(account ?? "active"), minTTL: \(minTTL.map(String.init) ?? "default"), credential: \(passphrase != nil || keyFile != nil ? "<redacted>" : "none"))"
    }
}

extension AgentRequest: CustomDebugStringConvertible, CustomReflectable {
    public var debugDescription: String { description }
    /// The description alone, so `dump` cannot print the passphrase or a presented token.
    public var customMirror: Mirror { Mirror(self, children: ["description": description], displayStyle: .struct) }
}

/// A token the agent handed out. Its description never shows the value.
public struct AgentToken: Codable, Sendable, Hashable, CustomStringConvertible {
    public var value: String
    public var type: String
    /// Seconds since 1970.
    public var expiresAt: Double?
    public var account: String
    public var scopes: [String]
    /// The user name a credential helper answers with (credential requests only).
    public var username: String?
    /// The target the token is for, as the request named it (protocol 2 only; an agent that
    /// predates targets echoes none, and the client then refuses its token).
    public var resources: [String] = []
    public var requestedScopes: [String] = []

    public init(value: String, type: String, expiresAt: Date?, account: String, scopes: [String], username: String? = nil) {
        self.value = value
        self.type = type
        self.expiresAt = expiresAt?.timeIntervalSince1970
        self.account = account
        self.scopes = scopes
        self.username = username
    }

    public var expiry: Date? { expiresAt.map(Date.init(timeIntervalSince1970:)) }

    enum CodingKeys: String, CodingKey {
        case value, type, account, scopes, username
        case expiresAt = "expires_at"
    }

    public var description: String { "AgentToken(account: \(account), type: \(type), value: <redacted \(value.utf8.count) bytes>)" }
}

extension AgentToken: CustomDebugStringConvertible, CustomReflectable {
    public var debugDescription: String { description }
    /// The description alone, so `dump` cannot print the token.
    public var customMirror: Mirror { Mirror(self, children: ["description": description], displayStyle: .struct) }
}

/// What `status` answers.
public struct AgentStatus: Codable, Sendable, Hashable {
    public var vault: String
    public var pid: Int32
    public var locked: Bool
    /// Seconds of no use after which the agent drops the keys.
    public var lockAfter: Int?
    /// Seconds since 1970 of the last request served.
    public var lastUse: Double?
    public var startedAt: Double
    public var socket: String
    /// Why a locked agent is locked: `key_changed` when another process replaced the vault's
    /// keys (`rotate-key`, `passwd`) or the vault file, nil for an ordinary lock.
    public var lockReason: String?
    /// The key slot that unlocked the vault (0: its own credential); nil while locked, and from
    /// an agent that predates key slots.
    public var unlockedBy: Int64?
    /// The active account (nil: none, or the agent is locked or predates it).
    public var activeAccount: String?
    /// The active account's state in the seeds' vocabulary (`AccountState.name`:
    /// `active_signed_in`, `active_device_pending`, `locked`, `expired`, `inactive`, `unknown`);
    /// nil while the agent is locked, and from an agent that predates it.
    public var accountState: String?

    public init(
        vault: String, pid: Int32, locked: Bool, lockAfter: Int?, lastUse: Date?, startedAt: Date, socket: String, lockReason: String? = nil,
        unlockedBy: Int64? = nil
    ) {
        self.vault = vault
        self.unlockedBy = unlockedBy
        self.pid = pid
        self.locked = locked
        self.lockReason = lockReason
        self.lockAfter = lockAfter
        self.lastUse = lastUse?.timeIntervalSince1970
        self.startedAt = startedAt.timeIntervalSince1970
        self.socket = socket
    }

    enum CodingKeys: String, CodingKey {
        case vault, pid, locked, socket
        case lockReason = "lock_reason"
        case unlockedBy = "unlocked_by_slot"
        case lockAfter = "lock_after_seconds"
        case lastUse = "last_use"
        case startedAt = "started_at"
        case activeAccount = "active_account"
        case accountState = "account_state"
    }
}

/// A failure, with the `vault` exit code it maps to.
public struct AgentFailure: Codable, Sendable, Hashable, Error, CustomStringConvertible {
    public var code: String
    public var exit: Int32
    public var message: String

    public init(code: String, exit: Int32, message: String) {
        self.code = code
        self.exit = exit
        self.message = message
    }

    public var description: String { message }
}

/// One response from the agent.
public struct AgentResponse: Codable, Sendable {
    public var v: Int
    public var ok: Bool
    public var token: AgentToken?
    public var status: AgentStatus?
    /// `hosts`: every credential host and the user name it answers with.
    public var hosts: [String: String]?
    /// `dpop_proof`: the signed proof (its token, when it names one, in ``token``).
    public var proof: String?
    /// `token` with ``AgentRequest/sensitive``: the sensitive action was recorded.
    public var sensitiveRecorded = false
    public var error: AgentFailure?

    public init(token: AgentToken? = nil, status: AgentStatus? = nil, hosts: [String: String]? = nil) {
        v = AgentProtocol.version
        ok = true
        self.token = token
        self.status = status
        self.hosts = hosts
    }

    public init(failure: AgentFailure) {
        v = AgentProtocol.version
        ok = false
        error = failure
    }

    public static func failure(_ code: String, exit: Int32 = 1, _ message: String) -> AgentResponse {
        AgentResponse(failure: AgentFailure(code: code, exit: exit, message: message))
    }
    /// Protocol 1's members (``sensitiveRecorded`` is protocol 2's only).
    enum CodingKeys: String, CodingKey {
        case v, ok, token, status, hosts, proof, error
    }
}
