import DevGateway
import Foundation
import Testing
import VaultTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Another local user reaches nothing: tried as an attacker would, with the built binary, an
/// unprivileged *victim* user and `nobody` attacking it. CI runs as root, and root passes
/// every permission check, so the tests make the victim (useradd) and act as both users with
/// setpriv; the binary is copied where both can run it.
@Suite("Local trust: a squatter on the agent's socket, another user racing the browser sign-in")
struct LocalTrustTests {
    static let tools = ["/usr/sbin/useradd", "/usr/sbin/userdel", "/usr/bin/setpriv", "/usr/bin/python3"]
    /// Needs root (to make a user and act as two) and the tools (`make test` installs them).
    static let canActAsUsers = getuid() == 0 && tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    static let nobody: UInt32 = 65534

    /// A user made for one test, its home under /tmp, the `vault` binary copied for it.
    final class Victim: Sendable {
        let name: String
        let uid: UInt32
        let home: URL
        /// World-readable: the copied `vault` and anything both users run.
        let shared: URL
        let scratch: TemporaryDirectory

        init() async throws {
            scratch = try TemporaryDirectory("trust")
            let tag = UUID().uuidString.lowercased().prefix(8)
            name = "cvv\(tag)"
            home = URL(fileURLWithPath: "/tmp/cv-home-\(tag)")
            shared = URL(fileURLWithPath: "/tmp/cv-shared-\(tag)")
            let made = try await BuiltProgram.run(
                URL(fileURLWithPath: "/usr/sbin/useradd"),
                ["--create-home", "--home-dir", home.path, "--shell", "/bin/sh", "--user-group", name],
                environment: ["PATH": "/usr/sbin:/usr/bin:/bin"], in: scratch)
            try #require(made.status == 0, "useradd: \(made.stderr)")
            guard let entry = getpwnam(name) else { throw Failure("\(name) is not in the password database") }
            uid = entry.pointee.pw_uid
            try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
            binary = try await LocalTrustTests.binaryForEveryone.value
            // A sanitizer's reports from the victim's processes: somewhere it can write, moved
            // to the run's report directory at the end (an unwritable log_path aborts them).
            try FileManager.default.createDirectory(at: shared.appending(path: "reports"), withIntermediateDirectories: false)
            chmod(shared.appending(path: "reports").path, 0o1777)
        }

        func remove() async {
            // Every process left of the victim's (a browser still waiting, a login), or userdel refuses.
            Self.killProcesses(of: uid)
            for (_, directory) in Self.sanitizerLogDirectories() {
                let reports = shared.appending(path: "reports")
                for name in (try? FileManager.default.contentsOfDirectory(atPath: reports.path)) ?? [] {
                    try? FileManager.default.moveItem(at: reports.appending(path: name), to: directory.appending(path: "victim-\(name)"))
                }
            }
            _ = try? await BuiltProgram.run(
                URL(fileURLWithPath: "/usr/sbin/userdel"), ["--remove", name], environment: ["PATH": "/usr/sbin:/usr/bin:/bin"], in: scratch)
            try? FileManager.default.removeItem(at: home)
            try? FileManager.default.removeItem(at: shared)
        }

        /// SIGKILL to every process whose real uid is `uid` (from `/proc/PID/status`: a
        /// non-dumpable process's `/proc/PID` is root's, whatever its uid).
        static func killProcesses(of uid: UInt32) {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            for entry in entries {
                guard let pid = Int32(entry) else { continue }
                let status = String(decoding: FileProbe.bytes(URL(fileURLWithPath: "/proc/\(entry)/status")), as: UTF8.self)
                guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }) else { continue }
                if line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first == Substring("\(uid)") { kill(pid, SIGKILL) }
            }
        }

        var vault: URL { home.appending(path: "vault.db") }
        let binary: URL

        /// The `*SAN_OPTIONS` variables of a sanitizer run that name a `log_path`, and its directory.
        static func sanitizerLogDirectories() -> [(variable: String, directory: URL)] {
            ProcessInfo.processInfo.environment.compactMap { variable, value in
                guard variable.hasSuffix("SAN_OPTIONS"),
                    let path = value.split(separator: " ").first(where: { $0.hasPrefix("log_path=") })?.dropFirst("log_path=".count)
                else { return nil }
                return (variable, URL(fileURLWithPath: String(path)).deletingLastPathComponent())
            }
        }

        /// The victim's environment: no runtime directory (su, cron, ssh without logind).
        func environment(_ extra: [String: String] = [:]) -> [String: String] {
            var environment = ["PATH": "\(shared.path):/usr/bin:/bin", "HOME": home.path, "VAULT_PATH": vault.path, "USER": name]
            for (variable, _) in Self.sanitizerLogDirectories() {
                let value = ProcessInfo.processInfo.environment[variable] ?? ""
                let rewritten = value.split(separator: " ").map { option in
                    option.hasPrefix("log_path=") ? "log_path=\(shared.path)/reports/\(option.split(separator: "/").last ?? "san")" : String(option)
                }
                environment[variable] = rewritten.joined(separator: " ")
            }
            return environment.merging(extra) { $1 }
        }

        /// `vault ARGUMENTS` run as the victim.
        func vault(_ arguments: [String], _ extra: [String: String] = [:]) async throws -> BuiltProgram.Output {
            try await BuiltProgram.run(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                ["--reuid=\(uid)", "--regid=\(uid)", "--init-groups", binary.path] + arguments,
                environment: environment(extra), in: scratch)
        }

        /// A file in the victim's home, theirs, 0600.
        func privateFile(_ name: String, _ contents: String) throws -> URL {
            let url = home.appending(path: name)
            try Data(contents.utf8).write(to: url)
            chown(url.path, uid, uid)
            chmod(url.path, 0o600)
            return url
        }
    }

    /// The built `vault` where every user can run it: the build's own when every directory on
    /// its path lets others through, else one copy per test process, made on a thread of its
    /// own (a sanitizer build is hundreds of MB: never copied on the cooperative pool, nor once
    /// per test).
    static let binaryForEveryone = Task<URL, any Error> {
        let built = try BuiltProgram.url(named: "vault")
        var directory = built.deletingLastPathComponent()
        var reachable = FileProbe.mode(built).map { $0 & 0o005 == 0o005 } ?? false
        while reachable && directory.path != "/" {
            reachable = FileProbe.mode(directory).map { $0 & 0o001 != 0 } ?? false
            directory.deleteLastPathComponent()
        }
        if reachable { return built }
        let copy = URL(fileURLWithPath: "/tmp/cv-vault-\(getpid())")
        atexit { try? FileManager.default.removeItem(atPath: "/tmp/cv-vault-\(getpid())") }
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
                        let binary = copy.appending(path: "vault")
                        if !FileManager.default.fileExists(atPath: binary.path) { try FileManager.default.copyItem(at: built, to: binary) }
                        chmod(binary.path, 0o755)
                        return binary
                    })
            }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static func withVictim(_ body: (Victim) async throws -> Void) async throws {
        let victim = try await Victim()
        do {
            try await body(victim)
        } catch {
            await victim.remove()
            throw error
        }
        await victim.remove()
    }

    /// Runs a Python program as `nobody`.
    static func asNobody(_ program: String, _ arguments: [String], in directory: TemporaryDirectory) throws -> ChildProgram {
        try ChildProgram(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "/usr/bin/python3", "-c", program] + arguments,
            environment: ["PATH": "/usr/bin:/bin"])
    }

    /// Listens on every path given, logs what each connection sends, answers with its own token.
    static let squatter = #"""
        import os, socket, sys, threading
        log = open(sys.argv[1], "ab", buffering=0)
        def serve(server):
            while True:
                connection, _ = server.accept()
                connection.settimeout(5)
                data = b""
                try:
                    while not data.endswith(b"\n"):
                        chunk = connection.recv(65536)
                        if not chunk: break
                        data += chunk
                except Exception:
                    pass
                log.write(b"RECEIVED %d %s\n" % (len(data), data))
                try:
                    connection.sendall(b'{"v":1,"ok":true,"token":{"value":"SQUATTER-TOKEN","type":"Bearer","account":"x","scopes":[]}}\n')
                except Exception:
                    pass
                connection.close()
        for path in sys.argv[2:]:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            server = socket.socket(socket.AF_UNIX)
            server.bind(path)
            os.chmod(path, 0o777)
            server.listen(16)
            threading.Thread(target=serve, args=(server,), daemon=True).start()
        print("listening", flush=True)
        sys.stdin.read()
        """#

    @Test(
        "a squatter on the agent's socket path gets no byte of the passphrase, and no request is answered with its token",
        .enabled(if: canActAsUsers, "needs root, useradd, setpriv and python3 to act as a victim and as nobody"),
        .timeLimit(.minutes(TestTimeScale.minutes(3))))
    func squatterGetsNothing() async throws {
        try await Self.withVictim { victim in
            let passphrase = "victim passphrase 7f3a"
            let passphraseFile = try victim.privateFile("passphrase", passphrase + "\n")
            let created = try await victim.vault(["init", "--passphrase-file", passphraseFile.path])
            try #require(created.status == 0, "\(created.stderr)")
            // The victim's agent, once: where it listens (the name anyone can compute).
            let started = try await victim.vault(["agent", "start", "--passphrase-file", passphraseFile.path])
            try #require(started.status == 0, "\(started.stderr)")
            let status = try await victim.vault(["agent", "status", "--json"])
            let socket = try #require(
                (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])?["socket"] as? String, "\(status)")
            #expect(socket.hasPrefix(victim.home.path + "/.local/state/credentialvault/run-"), "\(socket)")
            #expect(try await victim.vault(["agent", "stop"]).status == 0)
            let socketName = URL(fileURLWithPath: socket).lastPathComponent

            // The attacker's places: the old fixed name under /tmp, and a runtime directory of
            // its own that the victim's environment names (as `su` without `-` leaves it).
            let attackerBase = URL(fileURLWithPath: "/tmp/cv-squat-\(UUID().uuidString.lowercased().prefix(8))")
            try FileManager.default.createDirectory(at: attackerBase, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            chown(attackerBase.path, Self.nobody, Self.nobody)
            defer { try? FileManager.default.removeItem(at: attackerBase) }
            let oldPlace = URL(fileURLWithPath: "/tmp/credentialvault-\(victim.uid)").appending(path: socketName)
            defer { try? FileManager.default.removeItem(at: oldPlace.deletingLastPathComponent()) }
            let runtimePlace = attackerBase.appending(path: "runtime/credentialvault").appending(path: socketName)
            let spare = attackerBase.appending(path: "spare.sock")
            let log = attackerBase.appending(path: "log")
            let squatter = try Self.asNobody(Self.squatter, [log.path, oldPlace.path, runtimePlace.path, spare.path], in: victim.scratch)
            defer { Task { await squatter.kill() } }
            #expect(await squatter.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.lines.contains("listening") || $0.exitStatus != nil })
            let suWithoutDash = ["XDG_RUNTIME_DIR": attackerBase.appending(path: "runtime").path]

            // No agent of the victim's: nothing is sent anywhere, the squatter's token never used.
            for extra in [[:], suWithoutDash] {
                let unlock = try await victim.vault(["unlock", "--passphrase-file", passphraseFile.path], extra)
                #expect(unlock.status == 67, "\(unlock.status) \(unlock.stderr)")
                let token = try await victim.vault(["token", "--passphrase-file", passphraseFile.path], extra)
                #expect(!token.stdout.contains("SQUATTER"), "\(token.stdout)")
                let status = try await victim.vault(["agent", "status"], extra)
                #expect(status.status == 67, "\(status.status) \(status.stderr)")
            }

            // A listener of another uid in the victim's own place (the socket moved there and
            // given to the victim, as only root could): refused on SO_PEERCRED, nothing sent,
            // and no fall-back to opening the vault behind the user's back.
            #expect(rename(spare.path, socket) == 0, "\(String(cString: strerror(errno)))")
            chown(socket, victim.uid, victim.uid)
            let refusedUnlock = try await victim.vault(["unlock", "--passphrase-file", passphraseFile.path])
            #expect(refusedUnlock.status == 82, "\(refusedUnlock.status) \(refusedUnlock.stderr)")
            #expect(refusedUnlock.stderr.contains("uid \(Self.nobody)"), "\(refusedUnlock.stderr)")
            let refusedToken = try await victim.vault(["token", "--passphrase-file", passphraseFile.path])
            #expect(refusedToken.status == 82, "\(refusedToken.status) \(refusedToken.stderr)")
            #expect(!refusedToken.stdout.contains("SQUATTER"))

            // What the squatter saw: connections at most, never a byte.
            let seen = String(decoding: FileProbe.bytes(log), as: UTF8.self)
            #expect(!seen.contains(passphrase))
            #expect(!seen.contains("\"op\""), "\(seen)")
            for line in seen.split(separator: "\n") { #expect(line.hasPrefix("RECEIVED 0 "), "\(line)") }
        }
    }

    @Test(
        "an agent started by systemd (in /run/user/UID) is found from cron (no runtime directory) and from a login shell",
        .enabled(if: canActAsUsers && FileManager.default.fileExists(atPath: "/run"), "needs root, useradd, setpriv and /run"),
        .timeLimit(.minutes(TestTimeScale.minutes(3))))
    func foundFromEveryPlace() async throws {
        try await Self.withVictim { victim in
            let runtime = URL(fileURLWithPath: "/run/user/\(victim.uid)")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            chown(runtime.path, victim.uid, victim.uid)
            defer { try? FileManager.default.removeItem(at: runtime) }
            let key = victim.home.appending(path: "vault.key")
            try #require(try await victim.vault(["init", "--key-file", key.path]).status == 0)
            let systemd = ["XDG_RUNTIME_DIR": runtime.path]
            let started = try await victim.vault(["agent", "start", "--key-file", key.path], systemd)
            try #require(started.status == 0, "\(started.stderr)")
            #expect(started.stdout.contains(runtime.path + "/credentialvault/"), "\(started.stdout)")
            for environment in [[:], systemd] {
                let status = try await victim.vault(["agent", "status"], environment)
                #expect(status.status == 0, "\(environment): \(status.stderr)")
                #expect(status.stdout.contains("unlocked"))
            }
            #expect(try await victim.vault(["agent", "stop"]).status == 0)
        }
    }

    /// Scans every process's argv for a loopback sign-in URL, then tries it and the callback.
    static let racer = #"""
        import glob, json, os, re, sys, time, urllib.error, urllib.request
        out, deadline, launcher = sys.argv[1], time.time() + float(sys.argv[2]), sys.argv[3].encode()
        result = {"found": None, "leaked": False, "opener": None, "callback": None}
        me = "/proc/%d/cmdline" % os.getpid()
        while time.time() < deadline and result["found"] is None:
            for path in glob.glob("/proc/[0-9]*/cmdline"):
                if path == me: continue
                try:
                    words = open(path, "rb").read().split(b"\0")
                except Exception:
                    continue
                opener = launcher in words
                for word in words:
                    text = word.decode("utf-8", "replace")
                    if re.search(r"(state|code_challenge|nonce)=", text):
                        result["leaked"] = True
                    if opener and re.match(r"http://127\.0\.0\.1:\d+/", text):
                        result["found"] = text
            time.sleep(0.05)
        def status(url):
            try:
                return urllib.request.urlopen(url, timeout=30).status
            except urllib.error.HTTPError as error:
                return error.code
            except Exception as error:
                return str(error)
        if result["found"]:
            port = re.match(r"http://127\.0\.0\.1:(\d+)/", result["found"]).group(1)
            result["opener"] = status(result["found"])
            result["callback"] = status("http://127.0.0.1:%s/callback?code=attackers-code&state=guess" % port)
        open(out, "w").write(json.dumps(result))
        """#

    @Test(
        "a second user racing the browser sign-in (argv read, own code delivered) is refused and stores no account",
        .enabled(if: canActAsUsers, "needs root, useradd, setpriv and python3 to act as a victim and as nobody"),
        .timeLimit(.minutes(TestTimeScale.minutes(3))))
    func browserSignInBelongsToItsUser() async throws {
        let gateway = try await DevGateway.start()
        await gateway.registerClient(id: "vault-cli")
        await gateway.signInBrowserUser("alice")
        defer { Task { await gateway.stop() } }
        try await Self.withVictim { victim in
            let key = victim.home.appending(path: "vault.key")
            let created = try await victim.vault(["init", "--key-file", key.path])
            try #require(created.status == 0, "\(created.stderr)")
            // The race's meeting place, and the victim's "browser": an xdg-open that waits for
            // the attacker's turn, then follows the link it was given as the victim.
            let meeting = URL(fileURLWithPath: "/tmp/cv-race-\(UUID().uuidString.lowercased().prefix(8))")
            try FileManager.default.createDirectory(at: meeting, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
            chmod(meeting.path, 0o1777)
            defer { try? FileManager.default.removeItem(at: meeting) }
            let browser = victim.shared.appending(path: "xdg-open")
            let waitSteps = Int(TestTimeScale.scaled(.seconds(60)).components.seconds) * 10
            let script = """
                #!/bin/sh
                i=0
                while [ ! -e "\(meeting.path)/go" ] && [ -d "\(meeting.path)" ] && [ $i -lt \(waitSteps) ]; do sleep 0.1; i=$((i+1)); done
                /usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=60).read().decode())' "$1" > "\(victim.home.path)/page" 2>&1
                """
            try Data(script.utf8).write(to: browser)
            chmod(browser.path, 0o755)

            let login = try ChildProgram(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                [
                    "--reuid=\(victim.uid)", "--regid=\(victim.uid)", "--init-groups", victim.binary.path, "login",
                    "--issuer", gateway.baseURL.absoluteString, "--client-id", "vault-cli", "--browser", "--key-file", key.path,
                ],
                environment: victim.environment(["DISPLAY": ":99"]))
            defer { Task { await login.kill() } }
            let results = meeting.appending(path: "racer.json")
            let racer = try await BuiltProgram.run(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                [
                    "--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups", "/usr/bin/python3", "-c", Self.racer, results.path,
                    "\(TestTimeScale.scaled(.seconds(60)).components.seconds)", browser.path,
                ],
                environment: ["PATH": "/usr/bin:/bin"], in: victim.scratch)
            #expect(racer.status == 0, "\(racer.stderr)")
            _ = FileManager.default.createFile(atPath: meeting.appending(path: "go").path, contents: nil)

            let report = try #require(try JSONSerialization.jsonObject(with: Data(FileProbe.bytes(results))) as? [String: Any], "\(racer)")
            #expect(report["found"] is String, "the attacker saw the launcher's link: \(report)")
            #expect(report["leaked"] as? Bool == false, "no argv holds the authorization request: \(report)")
            #expect(report["opener"] as? Int == 403, "\(report)")
            #expect(report["callback"] as? Int == 403, "\(report)")

            #expect(await login.output.wait(upTo: TestTimeScale.scaled(.seconds(90))) { $0.exitStatus != nil })
            #expect(login.output.value.exitStatus == 0, "\(login.output.value.standardError)")
            let page = String(decoding: FileProbe.bytes(victim.home.appending(path: "page")), as: UTF8.self)
            #expect(page.contains("Signed in"), "\(page)")
            let accounts = try await victim.vault(["accounts", "list", "--json", "--key-file", key.path])
            let list = try JSONSerialization.jsonObject(with: Data(accounts.stdout.utf8)) as? [[String: Any]]
            #expect(list?.map { $0["subject"] as? String } == ["alice"], "\(accounts)")
        }
    }
}
