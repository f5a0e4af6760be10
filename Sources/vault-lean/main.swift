// `vault-lean`: the front of the `vault` command for what scripts run before every API call.
//
// It serves `vault token [--vault P] [--account A] [--min-ttl D] [--no-prompt]` from a running agent and
// prints the token, linking only the standard library (statically) and AgentWire: no
// Foundation, no argument parser, no NIO, so the whole process costs about what the sqlite3
// CLI does. Everything else — another command or option, no agent, an agent it cannot trust
// or talk to — runs the full command from this program's own directory (`/proc/self/exe`,
// never `$PATH`) with the same arguments, so what the user sees comes from one place. An
// agent's failure (locked, signed out, unknown account) is reported here exactly as the full
// command reports it, so the agent is asked once.
//
// Installed as `vault` (the full command as `vault-full` beside it) and as
// `git-credential-vault` and `docker-credential-vault`. It serves git's `get` from the agent
// too (git asks before every fetch and push); docker's requests, and any git request the agent
// does not answer, go to the full command with standard input replayed as it was read.

import AgentWire
internal import CProcessControl

#if canImport(Glibc)
    import Glibc
#endif

/// What `vault token` asks, when the lean path can serve it.
struct TokenRequest {
    var vault: String?
    var account: String?
    var minTTL: Int64?
    var noPrompt = false
}

/// The request when `arguments` (after the program name) are a `token` command this program
/// serves, else nil. Global options may come before the subcommand (`vault --vault x token`).
func tokenRequest(_ arguments: ArraySlice<String>) -> TokenRequest? {
    var request = TokenRequest()
    var sawToken = false
    var rest = arguments
    func value(_ option: String, _ argument: String) -> String?? {
        if argument == option {
            guard let next = rest.first, !next.hasPrefix("-") || next == "-" else { return .some(nil) }
            rest = rest.dropFirst()
            return .some(next)
        }
        if argument.hasPrefix(option + "=") { return .some(String(argument.dropFirst(option.count + 1))) }
        return nil
    }
    while let argument = rest.first {
        rest = rest.dropFirst()
        if argument == "token", !sawToken {
            sawToken = true
            continue
        }
        if let given = value("--vault", argument) {
            guard let path = given, !path.isEmpty, !path.hasPrefix("~"), request.vault == nil else { return nil }
            request.vault = path
        } else if sawToken, let given = value("--account", argument) {
            guard let account = given, request.account == nil else { return nil }
            request.account = account
        } else if sawToken, let given = value("--min-ttl", argument) {
            guard let text = given, request.minTTL == nil, let seconds = seconds(text) else { return nil }
            request.minTTL = seconds
        } else if sawToken, argument == "--no-prompt", !request.noPrompt {
            request.noPrompt = true
        } else {
            return nil  // help, --json, --no-agent, credentials, -v, another command…
        }
    }
    return sawToken ? request : nil
}

/// `90s`, `15m`, `12h`, `30d` in seconds (what the full command's `--min-ttl` takes), or nil.
func seconds(_ text: String) -> Int64? {
    let lowered = text.lowercased()
    guard let unit = lowered.last, let value = Int64(lowered.dropLast()), value > 0 else { return nil }
    let scale: Int64
    switch unit {
    case "s": scale = 1
    case "m": scale = 60
    case "h": scale = 3600
    case "d": scale = 86_400
    default: return nil
    }
    let (product, overflow) = value.multipliedReportingOverflow(by: scale)
    return overflow ? nil : product
}

/// The vault file: --vault, else $VAULT_PATH, else $XDG_DATA_HOME/credentialvault/vault.db,
/// else ~/.local/share/credentialvault/vault.db. Nil where only the full command knows.
func vaultPath(_ given: String?) -> String? {
    if let given { return given }
    if let path = AgentPlaces.processEnvironment("VAULT_PATH"), !path.isEmpty {
        return path.hasPrefix("~") ? nil : path
    }
    if let data = AgentPlaces.processEnvironment("XDG_DATA_HOME"), data.hasPrefix("/") {
        return data + "/credentialvault/vault.db"
    }
    guard let home = AgentPlaces.processEnvironment("HOME"), home.hasPrefix("/") else { return nil }
    return home + "/.local/share/credentialvault/vault.db"
}

/// Runs the full command beside this program with the same arguments and, when `replay` is
/// given, standard input as it was before this program read it; returns only when it cannot
/// (and then exits 1 with the reason).
func handOver(replay: [UInt8]? = nil) -> Never {
    if let replay { replayStandardInput(replay) }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard length > 0 else { fail("cannot find this program's own path (/proc/self/exe): \(String(cString: strerror(errno)))") }
    let me = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let directory = me[..<(me.lastIndex(of: "/") ?? me.startIndex)]
    var own = stat()
    _ = stat(me, &own)
    for name in ["vault-full", "vault"] {
        let candidate = directory + "/" + name
        var info = stat()
        guard stat(candidate, &info) == 0, info.st_dev != own.st_dev || info.st_ino != own.st_ino else { continue }
        let arguments = CommandLine.arguments.map { strdup($0) } + [nil]
        execv(candidate, arguments)
        fail("cannot run \(candidate): \(String(cString: strerror(errno)))")
    }
    fail("the full vault command is not installed beside \(me) (as vault-full)")
}

/// Makes standard input a pipe holding `bytes` and then nothing: what this program read of a
/// request (at most 64 KiB, a pipe's capacity, so the write never blocks), for the full
/// command to read again. A request is read whole (up to its blank line or end) before any
/// answer, so nothing after it is lost.
func replayStandardInput(_ bytes: [UInt8]) {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { fail("cannot hand the request over: \(String(cString: strerror(errno)))") }
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { fail("cannot hand the request over: \(String(cString: strerror(errno)))") }
        offset += written
    }
    close(ends[1])
    guard dup2(ends[0], STDIN_FILENO) >= 0 else { fail("cannot hand the request over: \(String(cString: strerror(errno)))") }
    close(ends[0])
}

// MARK: - git credential get

/// The largest request `vault git-credential` reads (its lines and their newlines).
let requestLimit = 64 * 1024

/// What git sent: its `key=value` lines up to a blank line or the end, parsed as
/// `vault git-credential` does, and the bytes read (for a hand-over). `tooLarge` when the full
/// command would refuse it.
struct GitRequest {
    var attributes: [String: String] = [:]
    var read: [UInt8] = []
    var tooLarge = false
}

func readGitRequest() -> GitRequest {
    var request = GitRequest()
    var chunk = [UInt8](repeating: 0, count: 4096)
    var ended = false
    // Read until a blank line or the end, at most one byte past the limit.
    while !ended, request.read.count <= requestLimit {
        let count = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, min($0.count, requestLimit + 1 - request.read.count)) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        request.read.append(contentsOf: chunk[0..<count])
        ended = request.read.starts(with: [0x0A]) || containsBlankLine(request.read)
    }
    var total = 0
    var lines = request.read.split(separator: 0x0A, omittingEmptySubsequences: false)
    if request.read.last == 0x0A { lines.removeLast() }  // no line after the last newline
    for line in lines {
        var bytes = Array(line)
        if bytes.last == 0x0D { bytes.removeLast() }
        total += bytes.count + 1
        if total > requestLimit {
            request.tooLarge = true
            return request
        }
        if bytes.isEmpty { break }
        guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else { continue }
        request.attributes[String(decoding: bytes[..<equals], as: UTF8.self)] = String(decoding: bytes[(equals + 1)...], as: UTF8.self)
    }
    return request
}

func containsBlankLine(_ bytes: [UInt8]) -> Bool {
    var previous: UInt8 = 0x0A
    var beforePrevious: UInt8 = 0
    for byte in bytes {
        if byte == 0x0A && (previous == 0x0A || (previous == 0x0D && beforePrevious == 0x0A)) { return true }
        beforePrevious = previous
        previous = byte
    }
    return false
}

/// `get` for git: the agent's token for the host, or nothing (git asks its next helper).
func serveGitGet() -> Never {
    let request = readGitRequest()
    if request.tooLarge { fail("the credential request is larger than 64 KiB", code: 64) }
    guard let scheme = request.attributes["protocol"], let host = request.attributes["host"] else { exit(0) }
    guard let vault = vaultPath(nil) else { handOver(replay: request.read) }
    let username = request.attributes["username"].flatMap { $0.isEmpty ? nil : $0 }
    var message = WireMessage()
    message.append("op", "credential")
    message.append("min_ttl", "60")
    message.append("protocol", scheme)
    message.append("host", host)
    message.append("path", ifPresent: request.attributes["path"])
    message.append("username", ifPresent: username)
    // A locked agent asks for the passphrase on this process's terminal (found through
    // /dev/tty: git gives the helper pipes) or display.
    let terminal = RequesterTerminal.current()
    terminal?.append(to: &message)
    // Any failure is the full command's to judge: it first asks the file, without the key,
    // whether anything is bound to the host at all.
    guard let frame = ask(vault, message), frame["ok"] == "1" else {
        // The agent already asked for the passphrase (or could not): not a second prompt.
        if terminal != nil { setenv("VAULT_NO_PROMPT", "1", 1) }
        handOver(replay: request.read)
    }
    guard let token = frame["token"] else { exit(0) }
    let answeredAs = frame["username"]
    if let username, answeredAs != username { exit(0) }
    var lines = "username=\(answeredAs ?? "oauth2")\npassword=\(token)\n"
    if let expiry = frame["expires_at"].flatMap(Double.init) { lines += "password_expiry_utc=\(Int(expiry))\n" }
    writeAll(STDOUT_FILENO, lines)
    exit(0)
}

/// The agent's answer to `message`, or nil when no agent answers as protocol 2 says.
func ask(_ vault: String, _ message: WireMessage) -> WireMessage? {
    do {
        let (fd, _) = try AgentTrust.connect(AgentPlaces.socketName(forVault: vault), searching: AgentPlaces())
        defer { close(fd) }
        WireProtocol.setTimeouts(fd, seconds: 60)
        guard case .frame(let frame) = try WireProtocol.exchange(fd, message, preface: true) else { return nil }
        return frame
    } catch {
        return nil
    }
}

func fail(_ message: String, code: Int32 = 1) -> Never {
    writeAll(STDERR_FILENO, "vault: \(message)\n")
    exit(code)
}

func writeAll(_ fd: Int32, _ text: String) {
    var bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { break }
        offset += written
    }
    cv_wipe(&bytes, bytes.count)
}

// MARK: - main

let invokedAs = CommandLine.arguments.first.map { $0.split(separator: "/").last.map(String.init) ?? $0 } ?? "vault"
let arguments = Array(CommandLine.arguments.dropFirst())
// The token will be in this process's memory: no core file, no ptrace by the same user.
_ = cv_disable_core_dumps()

if (invokedAs == "git-credential-vault" && arguments == ["get"]) || arguments == ["git-credential", "get"] {
    serveGitGet()
}
guard invokedAs != "git-credential-vault", invokedAs != "docker-credential-vault",
    let request = tokenRequest(arguments[...]), let vault = vaultPath(request.vault)
else { handOver() }

var message = WireMessage()
message.append("op", "token")
message.append("account", ifPresent: request.account)
message.append("min_ttl", ifPresent: request.minTTL.map { String($0) })
if !request.noPrompt { RequesterTerminal.current()?.append(to: &message) }

// No agent, or one the full command must judge and report: handed over.
guard let frame = ask(vault, message) else { handOver() }
guard frame["ok"] == "1" else {
    guard let exit = frame["exit"].flatMap({ Int32($0) }), let text = frame["message"] else { handOver() }
    fail(text, code: WireProtocol.commandExitCodes.contains(exit) ? exit : 1)
}
guard let token = frame["token"] else { fail("the agent answered without a token") }
writeAll(STDOUT_FILENO, token + "\n")
exit(0)
