import DevGateway
import Foundation
import Testing
import VaultAgent
import VaultCrypto
import VaultTestSupport

@testable import vault

#if canImport(Glibc)
    import Glibc
#endif

/// `vault exec --keep-fresh` end to end: the built binary, a real agent, tokens from the gateway
/// that live seconds, the child a shell with curl (the documented examples, run as written).
@Suite("exec --keep-fresh: fresh tokens for a long-running command", .serialized)
struct KeepFreshTests {
    typealias World = AgentCommandTests.World

    /// A shell script's prelude: `status TOKEN` prints the HTTP status the gateway's API gives
    /// TOKEN; `tag TOKEN` 12 hex of its SHA-256 (tokens are never printed).
    static func prelude(_ world: World) -> String {
        let api = world.gateway.baseURL.appending(path: "api/profile").absoluteString
        return """
            status() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" '\(api)'; }
            tag() { printf %s "$1" | sha256sum | cut -c1-12; }

            """
    }

    @Test("a command running past three token lifetimes holds a valid token all along, from the file and from the socket; both are gone when it ends")
    func threeLifetimes() async throws {
        // Tokens of 6 s and a lead of 3 s, times the tests' time scale (18 s and 9 s in `make
        // test`): on a loaded machine a refresh was seen to take over 5 s from asking to the file.
        let lifetime = Int(6 * TestTimeScale.factor)
        try await AgentCommandTests.withWorld(accessTokenLifetime: .seconds(lifetime)) { world in
            #expect(try await world.start().status == 0)
            // The first token reached `accounts add` on standard input, a while after the gateway
            // issued it, and `expires_in` counts from then: a refresh first, so that every token
            // the command sees came over HTTP, its lifetime counted from the request.
            let refreshed = try await world.cli.run(["token", "--min-ttl", "\(lifetime - 1)s"])
            #expect(refreshed.status == 0, "\(refreshed)")
            // The file alone for at least two lifetimes and until it gave 6 tokens, 3 of them
            // different; then the socket alone for a lifetime and 3 tokens, 2 of them different:
            // a loaded machine stretches the loops rather than thinning them. A phase ends after
            // five lifetimes whatever it saw. Each line: the token's tag and when it was read
            // (ms), held against the gateway's record after; the API is called once at the end
            // (a loaded test process answers it slowly).
            let script =
                Self.prelude(world) + """
                    count() { reads=$((reads + 1)); g=$(tag "$1"); case " $seen " in *" $g "*) ;; *) seen="$seen $g"; distinct=$((distinct + 1)) ;; esac; }
                    phase() { start=$(date +%s); seen=""; distinct=0; reads=0; least=$1; long=$2; different=$3; }
                    more() {
                        now=$(date +%s)
                        [ $((now - start)) -lt \(5 * lifetime) ] && { [ $((now - start)) -le $long ] || [ $reads -lt $least ] || [ $distinct -lt $different ]; }
                    }
                    echo "paths $VAULT_TOKEN_FILE $VAULT_TOKEN_SOCKET $(stat -c %a "$(dirname "$VAULT_TOKEN_FILE")") $(stat -c %a "$VAULT_TOKEN_FILE")"
                    phase 6 \(2 * lifetime) 3
                    while more; do
                        t=$(cat "$VAULT_TOKEN_FILE"); at=$(date +%s%3N)
                        if [ -n "$t" ]; then count "$t"; echo "file $g $at"; else echo "file - $at"; fi; sleep 0.5
                    done
                    phase 3 \(lifetime) 2
                    while more; do
                        t=$(curl -sf --unix-socket "$VAULT_TOKEN_SOCKET" http://localhost/token); at=$(date +%s%3N)
                        if [ -n "$t" ]; then count "$t"; echo "socket $g $at"; else echo "socket - $at"; fi; sleep 1
                    done
                    echo "api $(status "$(cat "$VAULT_TOKEN_FILE")") $(status "$(curl -sf --unix-socket "$VAULT_TOKEN_SOCKET" http://localhost/token)")"
                    curl -sf --unix-socket "$VAULT_TOKEN_SOCKET" http://localhost/token.json | grep -q '"token_type"' && echo json
                    env | grep -c '^ACCESS_TOKEN=' || true
                    echo "ignored $(awk '/^SigIgn/ {print $2}' /proc/$$/status)"
                    exit 3
                    """
            let ran = try await world.cli.run(["exec", "--keep-fresh", "--min-ttl", "\(lifetime / 2)s", "--", "/bin/sh", "-c", script])
            #expect(ran.status == 3, "the command's status is exec's: \(ran)")
            let lines = ran.stdout.split(separator: "\n").map(String.init)
            // A read that found no token ("-": the file emptied as its token expired during a
            // refresh a starved gateway answered late) is allowed; an expired token never is.
            let file = lines.filter { $0.hasPrefix("file ") && !$0.hasPrefix("file - ") }.map { $0.split(separator: " ").map(String.init) }
            let socket = lines.filter { $0.hasPrefix("socket ") && !$0.hasPrefix("socket - ") }.map {
                $0.split(separator: " ").map(String.init)
            }
            #expect(file.count >= 6 && socket.count >= 3, "\(ran)")
            #expect(Set(file.map { $0[1] }).count >= 3, "the file was replaced as its tokens expired: \(file)")
            #expect(Set(socket.map { $0[1] }).count >= 2, "the agent refreshed while the socket answered: \(socket)")
            // Every token read was one the gateway issued, read before the expiry the gateway
            // gave it (its API would take an expired one).
            let expiries = Dictionary(
                await world.gateway.accessTokenExpiries().map { (Self.tag($0.key), $0.value.timeIntervalSince1970 * 1000) }
            ) { first, _ in first }
            for read in file + socket {
                let expiry = try #require(read.count == 3 ? expiries[read[1]] : nil, "a token the gateway issued: \(read)")
                let at = try #require(Double(read[2]))
                #expect(at < expiry, "read \(Int(at - expiry)) ms after its expiry: \(read)")
            }
            #expect(lines.contains("api 200 200"), "the API takes the last tokens from both: \(lines)")
            #expect(lines.contains("json") && lines.contains("0"), "the JSON form answers, and no token is in the environment: \(lines)")
            // SwiftNIO ignores SIGPIPE in `vault`; the command gets it at its default action.
            let ignored = try #require(lines.first { $0.hasPrefix("ignored ") }.flatMap { UInt64($0.dropFirst("ignored ".count), radix: 16) })
            #expect(ignored & (1 << (UInt64(SIGPIPE) - 1)) == 0, "SigIgn \(String(ignored, radix: 16))")
            let paths = try #require(lines.first { $0.hasPrefix("paths ") }?.split(separator: " ").map(String.init))
            #expect(paths.count == 5 && paths[3] == "700" && paths[4] == "600", "\(paths)")
            #expect(!FileManager.default.fileExists(atPath: paths[1]) && !FileManager.default.fileExists(atPath: paths[2]))
            #expect(!FileManager.default.fileExists(atPath: URL(fileURLWithPath: paths[1]).deletingLastPathComponent().path), "the place is gone")
            #expect(!ran.stderr.contains("not refreshed"), "\(ran.stderr)")
        }
    }

    /// The script's `tag`: the first 12 hex digits of the token's SHA-256.
    static func tag(_ token: String) -> String {
        Digest.sha256(Array(token.utf8)).prefix(6).map { String(format: "%02x", $0) }.joined()
    }

    @Test(
        "a locked agent: the socket answers 503 with the reason, the file keeps its token until it expires and is then empty; after `vault unlock` both are fresh again"
    )
    func lockedAgent() async throws {
        // Tokens of 12 s, refreshed 3 s before expiry: the lock comes well before the first
        // refresh even on a loaded machine, so the file still holds a valid token when it fails.
        try await AgentCommandTests.withWorld(accessTokenLifetime: .seconds(12)) { world in
            #expect(try await world.start().status == 0)
            let script =
                Self.prelude(world) + """
                    echo "ready $(status "$(cat "$VAULT_TOKEN_FILE")")"
                    read locked
                    echo "socket $(curl -s -w ' %{http_code}' --unix-socket "$VAULT_TOKEN_SOCKET" http://localhost/token | tr -d '\\n')"
                    while [ -s "$VAULT_TOKEN_FILE" ]; do sleep 0.2; done
                    echo emptied
                    read unlocked
                    t=$(curl -sf --unix-socket "$VAULT_TOKEN_SOCKET" http://localhost/token)
                    echo "again $(status "$t") $(status "$(cat "$VAULT_TOKEN_FILE")")"
                    """
            let child = try ChildProgram(
                try BuiltProgram.url(named: "vault"), ["exec", "--keep-fresh", "--min-ttl", "3s", "--", "/bin/sh", "-c", script],
                environment: world.environment)
            #expect(await child.waitForLine { $0.hasPrefix("ready") })
            #expect(child.output.value.lines.first == "ready 200", "\(child.output.value)")
            #expect(try await world.cli.run(["lock"]).status == 0)
            child.write("locked\n")
            #expect(await child.waitForLine { $0 == "emptied" }, "\(child.output.value)")
            let socket = try #require(child.output.value.lines.first { $0.hasPrefix("socket ") })
            #expect(socket.hasSuffix(" 503") && socket.contains("is locked") && socket.contains("(exit 79)"), "\(socket)")
            let stderr = child.output.value.standardError
            #expect(stderr.contains("keeps the last token until it expires at") && stderr.contains("the token file is empty"), "\(stderr)")
            #expect(try await world.cli.run(["unlock", "--key-file", world.keyFile.path]).status == 0)
            child.write("unlocked\n")
            let lines = try await child.finish()
            #expect(lines.last == "again 200 200", "\(lines)")
        }
    }

    @Test("a refresh that outlasts the file's token: the file is emptied before the token expires, then holds the new one")
    func refreshOutlastsToken() async throws {
        // Tokens of 12 s (times the time scale), a lead of 3 s: the agent's refresh is held at
        // the gateway until the test lets it go, long after the file's token expired.
        let lifetime = Int(12 * TestTimeScale.factor)
        try await AgentCommandTests.withWorld(accessTokenLifetime: .seconds(lifetime)) { world in
            #expect(try await world.start().status == 0)
            let script =
                Self.prelude(world) + """
                    echo "ready $(tag "$(cat "$VAULT_TOKEN_FILE")")"
                    while [ -s "$VAULT_TOKEN_FILE" ]; do sleep 0.1; done
                    echo "emptied $(date +%s%3N)"
                    while [ ! -s "$VAULT_TOKEN_FILE" ]; do sleep 0.1; done
                    echo "again $(status "$(cat "$VAULT_TOKEN_FILE")")"
                    """
            let child = try ChildProgram(
                try BuiltProgram.url(named: "vault"), ["exec", "--keep-fresh", "--min-ttl", "3s", "--", "/bin/sh", "-c", script],
                environment: world.environment)
            #expect(await child.waitForLine { $0.hasPrefix("ready ") }, "\(child.output.value)")
            // The command has its first token: every refresh from now on waits at the gateway.
            await world.gateway.holdTokenResponses()
            #expect(
                await child.waitForLine(timeout: TestTimeScale.scaled(.seconds(60)) + .seconds(lifetime)) { $0.hasPrefix("emptied ") },
                "\(child.output.value)")
            let lines = child.output.value.lines
            let first = try #require(lines.first { $0.hasPrefix("ready ") }?.dropFirst("ready ".count)).description
            let emptied = try #require(lines.first { $0.hasPrefix("emptied ") }.flatMap { Double($0.dropFirst("emptied ".count)) })
            let expiries = Dictionary(
                await world.gateway.accessTokenExpiries().map { (Self.tag($0.key), $0.value.timeIntervalSince1970 * 1000) }
            ) { first, _ in first }
            let expiry = try #require(expiries[first], "a token the gateway issued")
            #expect(emptied < expiry, "emptied \(Int(emptied - expiry)) ms after its token expired, not before")
            await world.gateway.releaseTokenResponses()
            let finished = try await child.finish()
            #expect(finished.last == "again 200", "\(finished)")
        }
    }

    @Test("a place left by a killed exec is removed by the next one; without an agent --keep-fresh says so and runs nothing")
    func killedParentAndNoAgent() async throws {
        try await AgentCommandTests.withWorld { world in
            #expect(try await world.start().status == 0)
            let child = try ChildProgram(
                try BuiltProgram.url(named: "vault"),
                ["exec", "--keep-fresh", "--", "/bin/sh", "-c", #"echo "file $VAULT_TOKEN_FILE"; exec sleep 600"#], environment: world.environment)
            #expect(await child.waitForLine { $0.hasPrefix("file ") })
            let file = try #require(child.output.value.lines.first?.dropFirst("file ".count)).description
            #expect(FileManager.default.fileExists(atPath: file))
            // The parent killed; its child (sleep), left behind, killed by hand (it holds the
            // output pipe open).
            let sleeper = try Self.children(of: child.processIdentifier)
            kill(child.processIdentifier, SIGKILL)
            for pid in sleeper { kill(pid, SIGKILL) }
            await child.kill()
            #expect(FileManager.default.fileExists(atPath: file), "a killed parent cannot clean up")
            let next = try await world.cli.run(["exec", "--keep-fresh", "--", "/bin/sh", "-c", #"test -s "$VAULT_TOKEN_FILE""#])
            #expect(next.status == 0, "\(next)")
            #expect(!FileManager.default.fileExists(atPath: URL(fileURLWithPath: file).deletingLastPathComponent().path), "the next exec removed it")

            #expect(try await world.cli.run(["agent", "stop"]).status == 0)
            let marker = world.cli.file("ran")
            let refused = try await world.cli.run(["exec", "--keep-fresh", "--", "/usr/bin/touch", marker.path])
            #expect(refused.status == 1 && refused.stderr.contains("vault agent start"), "\(refused)")
            #expect(!FileManager.default.fileExists(atPath: marker.path), "the command did not run")
            let mixed = try await world.cli.run(["exec", "--keep-fresh", "--env", "TOKEN", "--", "/usr/bin/true"])
            #expect(mixed.status == 64, "\(mixed)")
        }
    }

    /// The process ids whose parent is `pid`.
    static func children(of pid: Int32) throws -> [Int32] {
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
        return tasks.flatMap { task -> [Int32] in
            let text = String(decoding: FileProbe.bytes(URL(fileURLWithPath: "/proc/\(pid)/task/\(task)/children")), as: UTF8.self)
            return text.split(separator: " ").compactMap { Int32($0) }
        }
    }
}

/// ``ChildTokenPlace`` on its own: the files, their modes, and the places killed owners left.
@Suite("exec --keep-fresh: the token's place")
struct ChildTokenPlaceTests {
    @Test(
        "the token file is 0600 in a 0700 directory and replaced by rename: a reader that opened it keeps reading the token it opened; removal leaves nothing")
    func replacedByRename() throws {
        let base = try TemporaryDirectory()
        let place = try ChildTokenPlace(base: base.url.appending(path: "places"))
        #expect(try Self.mode(place.directory) == 0o700)
        #expect(FileManager.default.fileExists(atPath: place.tokenFile.path) && FileProbe.bytes(place.tokenFile).isEmpty, "empty until the first token")
        try place.write("first-token")
        #expect(try Self.mode(place.tokenFile) == 0o600)
        let reader = try FileHandle(forReadingFrom: place.tokenFile)
        try place.write("second-token")
        #expect(String(decoding: try reader.readToEnd() ?? Data(), as: UTF8.self) == "first-token")
        try reader.close()
        #expect(String(decoding: FileProbe.bytes(place.tokenFile), as: UTF8.self) == "second-token")
        place.remove()
        #expect(!FileManager.default.fileExists(atPath: place.directory.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: base.url.appending(path: "places").path).isEmpty)
    }

    @Test("places of owners that are gone (or whose pid now names another process) are removed; a live owner's and other names stay")
    func staleRemoved() throws {
        let base = try TemporaryDirectory()
        let places = base.url.appending(path: "places")
        try FileManager.default.createDirectory(at: places, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let parent = getppid()
        let parentStart = try #require(Self.startTime(of: parent))
        let namespace = try #require(Self.pidNamespace())
        let names = [
            "\(namespace)-\(parent)-\(parentStart)",  // alive
            "\(namespace)-\(parent)-\(parentStart + 1)",  // the pid reused by another process
            "\(namespace)-999999999-1",  // no such process
            "\(namespace + 1)-999999999-1",  // another pid namespace's (a container's): not judged here
            "notes",  // not a place
        ]
        for name in names {
            let directory = places.appending(path: name)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            try Data("a token".utf8).write(to: directory.appending(path: "token"))
        }
        #expect(ChildTokenPlace.removeStale(in: places) == 2)
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: places.path)) == [names[0], names[3], names[4]])
    }

    @Test("a base open to other users is refused, and nothing is written in it")
    func openBaseRefused() throws {
        let base = try TemporaryDirectory()
        let places = base.url.appending(path: "places")
        try FileManager.default.createDirectory(at: places, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        #expect {
            try ChildTokenPlace(base: places)
        } throws: { error in
            (error as? AgentFailure)?.message.contains("open to other users") == true
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: places.path).isEmpty)
    }

    static func mode(_ url: URL) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int ?? 0) & 0o777
    }

    /// The pid namespace's number, from `/proc/self/ns/pid` (`pid:[NUMBER]`).
    static func pidNamespace() -> UInt64? {
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")) ?? ""
        return UInt64(link.filter(\.isNumber))
    }

    /// `/proc/PID/stat` field 22.
    static func startTime(of pid: Int32) -> UInt64? {
        let text = String(decoding: FileProbe.bytes(URL(fileURLWithPath: "/proc/\(pid)/stat")), as: UTF8.self)
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }
}

/// When `--keep-fresh` replaces the file's token, from ``ChildTokenKeeper/schedule``: times in
/// seconds from a `now` of 1000.
@Suite("exec --keep-fresh: when the file's token is replaced")
struct KeepFreshScheduleTests {
    let now = 1000.0

    @Test("the first token, of a lifetime not yet known, with little more than --min-ttl left (it aged in the agent): replaced at once")
    func agedFirstToken() {
        let (wake, ask) = ChildTokenKeeper.schedule(
            current: (expiresAt: now + 3.25, writtenAt: now), lifetime: nil, failures: 0, now: now, minimumValidity: 3)
        #expect(wake.map { $0 == now + 0.25 } == true, "\(String(describing: wake))")
        #expect(ask == 4, "the agent is asked for longer than the token has left, so it refreshes")
        // Written with a full hour left: a fifth of what it had, then the lifetime is learned.
        let hour = ChildTokenKeeper.schedule(current: (now + 3600, now), lifetime: nil, failures: 0, now: now, minimumValidity: 60)
        #expect(hour.wake == now + 3600 - 720)
    }

    @Test("once a refresh told the lifetime: a fifth of it before expiry, at least --min-ttl, at most half; never sooner than a second")
    func learnedLifetime() {
        // An hour's token that reached the file with 10 minutes left: still 12 minutes' lead (at once).
        let aged = ChildTokenKeeper.schedule(current: (now + 600, now), lifetime: 3600, failures: 0, now: now, minimumValidity: 60)
        #expect(aged.wake == now + 1)
        let fresh = ChildTokenKeeper.schedule(current: (now + 3600, now), lifetime: 3600, failures: 0, now: now, minimumValidity: 60)
        #expect(fresh.wake == now + 3600 - 720 && fresh.ask == 721)
        let floor = ChildTokenKeeper.schedule(current: (now + 300, now), lifetime: 300, failures: 0, now: now, minimumValidity: 120)
        #expect(floor.wake == now + 300 - 120, "--min-ttl beats a fifth")
        let short = ChildTokenKeeper.schedule(current: (now + 4, now), lifetime: 4, failures: 0, now: now, minimumValidity: 3)
        #expect(short.wake == now + 2, "tokens of 4 s with --min-ttl 3s: half their lifetime, not a refresh every second")
    }

    @Test("after failures: retried after 1, 2, 4, 8, then every 10 s, and woken at the token's expiry to empty the file")
    func backoff() {
        let waits = (1...6).map { ChildTokenKeeper.schedule(current: (now + 3600, now), lifetime: 3600, failures: $0, now: now, minimumValidity: 60).wake }
        #expect(waits == [1, 2, 4, 8, 10, 10].map { now + $0 })
        let expiring = ChildTokenKeeper.schedule(current: (now + 3, now), lifetime: 3600, failures: 4, now: now, minimumValidity: 60)
        #expect(expiring.wake == now + 3)
        let empty = ChildTokenKeeper.schedule(current: nil, lifetime: nil, failures: 3, now: now, minimumValidity: 60)
        #expect(empty.wake == now + 4 && empty.ask == 60)
        let never = ChildTokenKeeper.schedule(current: (nil, now), lifetime: nil, failures: 0, now: now, minimumValidity: 60)
        #expect(never.wake == nil, "a token with no expiry stays as it is")
    }
}
