import AgentWire
import Foundation

// Requests and answers as frames of protocol 2 (``WireMessage``): one field per JSON member
// of protocol 1, lists as repeated keys. Field names are the protocol's, documented on
// ``AgentProtocol``.

extension AgentRequest {
    /// The request as a protocol-2 message.
    public var wire: WireMessage {
        var message = WireMessage()
        message.append("op", op.rawValue)
        message.append("account", ifPresent: account)
        message.append("min_ttl", ifPresent: minTTL.map(String.init))
        message.append("passphrase", ifPresent: passphrase)
        message.append("key_file", ifPresent: keyFile)
        message.append("protocol", ifPresent: self.protocol)
        message.append("host", ifPresent: host)
        message.append("path", ifPresent: path)
        message.append("presented", ifPresent: presented)
        message.append("username", ifPresent: username)
        for resource in resources { message.append("resource", resource) }
        for scope in scopes { message.append("scope", scope) }
        message.append("method", ifPresent: method)
        message.append("url", ifPresent: url)
        message.append("nonce", ifPresent: nonce)
        if withoutToken { message.append("no_token", "1") }
        if sensitive { message.append("sensitive", "1") }
        terminal?.append(to: &message)
        return message
    }

    /// The request a protocol-2 message carries; a failure to answer when it is not one.
    public init(wire message: WireMessage) throws(AgentFailure) {
        guard let name = message["op"] else { throw AgentFailure(code: "malformed_request", exit: 64, message: "the request names no operation") }
        guard let op = Operation(rawValue: name) else {
            throw AgentFailure(
                code: "unknown_op", exit: 64,
                message: "this agent does not know the operation \(name); it serves \(Operation.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var minTTL: Int?
        if let text = message["min_ttl"] {
            guard let seconds = Int(text), seconds >= 0 else {
                throw AgentFailure(code: "malformed_request", exit: 64, message: "min_ttl is not a number of seconds")
            }
            minTTL = seconds
        }
        self.init(op, account: message["account"], minTTL: minTTL, passphrase: message["passphrase"], keyFile: message["key_file"])
        self.protocol = message["protocol"]
        host = message["host"]
        path = message["path"]
        presented = message["presented"]
        username = message["username"]
        resources = message.values("resource")
        scopes = message.values("scope")
        method = message["method"]
        url = message["url"]
        nonce = message["nonce"]
        withoutToken = message["no_token"] == "1"
        sensitive = message["sensitive"] == "1"
        terminal = RequesterTerminal(message)
    }
}

extension AgentResponse {
    /// The answer as a protocol-2 message.
    public var wire: WireMessage {
        var message = WireMessage()
        message.append("ok", ok ? "1" : "0")
        if let error {
            message.append("error", error.code)
            message.append("exit", String(error.exit))
            message.append("message", error.message)
        }
        if let token {
            message.append("token", token.value)
            message.append("token_type", token.type)
            message.append("expires_at", ifPresent: token.expiresAt.map { String($0) })
            message.append("account", token.account)
            for scope in token.scopes { message.append("scope", scope) }
            message.append("username", ifPresent: token.username)
            for resource in token.resources { message.append("target_resource", resource) }
            for scope in token.requestedScopes { message.append("target_scope", scope) }
        }
        message.append("proof", ifPresent: proof)
        if sensitiveRecorded { message.append("sensitive_recorded", "1") }
        if let status {
            message.append("vault", status.vault)
            message.append("pid", String(status.pid))
            message.append("locked", status.locked ? "1" : "0")
            message.append("lock_after_seconds", ifPresent: status.lockAfter.map(String.init))
            message.append("last_use", ifPresent: status.lastUse.map { String($0) })
            message.append("started_at", String(status.startedAt))
            message.append("socket", status.socket)
            message.append("lock_reason", ifPresent: status.lockReason)
            message.append("unlocked_by_slot", ifPresent: status.unlockedBy.map(String.init))
            message.append("active_account", ifPresent: status.activeAccount)
            message.append("account_state", ifPresent: status.accountState)
        }
        if let hosts {
            message.append("hosts", String(hosts.count))
            for (host, user) in hosts.sorted(by: { $0.key < $1.key }) {
                message.append("host", host)
                message.append("host_user", user)
            }
        }
        return message
    }

    /// The answer a protocol-2 message carries.
    public init(wire message: WireMessage) throws(AgentConnectionError) {
        guard let ok = message["ok"] else { throw .badAnswer("the answer says neither ok nor failed") }
        if ok != "1" {
            guard let code = message["error"], let exit = message["exit"].flatMap({ Int32($0) }) else {
                throw .badAnswer("a failure without its code")
            }
            self.init(failure: AgentFailure(code: code, exit: exit, message: message["message"] ?? code))
            return
        }
        self.init()
        if let value = message["token"] {
            guard let type = message["token_type"], let account = message["account"] else { throw .badAnswer("a token without its type or account") }
            var token = AgentToken(value: value, type: type, expiresAt: nil, account: account, scopes: message.values("scope"), username: message["username"])
            token.expiresAt = message["expires_at"].flatMap(Double.init)
            token.resources = message.values("target_resource")
            token.requestedScopes = message.values("target_scope")
            self.token = token
        }
        proof = message["proof"]
        sensitiveRecorded = message["sensitive_recorded"] == "1"
        if let vault = message["vault"] {
            guard let pid = message["pid"].flatMap({ Int32($0) }), let started = message["started_at"].flatMap(Double.init),
                let socket = message["socket"]
            else { throw .badAnswer("a status without its process") }
            var status = AgentStatus(
                vault: vault, pid: pid, locked: message["locked"] == "1", lockAfter: message["lock_after_seconds"].flatMap { Int($0) },
                lastUse: nil, startedAt: Date(timeIntervalSince1970: started), socket: socket, lockReason: message["lock_reason"])
            status.lastUse = message["last_use"].flatMap(Double.init)
            status.unlockedBy = message["unlocked_by_slot"].flatMap { Int64($0) }
            status.activeAccount = message["active_account"]
            status.accountState = message["account_state"]
            self.status = status
        }
        if message["hosts"] != nil {
            let (hosts, users) = (message.values("host"), message.values("host_user"))
            guard hosts.count == users.count else { throw .badAnswer("hosts without their user names") }
            self.hosts = Dictionary(zip(hosts, users), uniquingKeysWith: { first, _ in first })
        }
    }
}
