// `make demo`: the whole product on a fresh vault in ./.demo/, against the development
// gateway on loopback, told in plain words. Tokens are never printed: only fingerprints.
import DevGateway
import Foundation
import Logging
import VaultOAuth
import VaultSession
import VaultStore

let narrator = Narrator()
let demoDirectory = URL(fileURLWithPath: CommandLine.arguments.dropFirst().first ?? ".demo", isDirectory: true)
let passphrase = "demo"

do {
    try await runDemo()
} catch {
    narrator.endCountdown()
    FileHandle.standardError.write(Data("demo failed: \(error)\n".utf8))
    exit(1)
}

func runDemo() async throws {
    var quiet = Logger(label: "demo")
    quiet.logLevel = .critical

    // A second run starts clean.
    try? FileManager.default.removeItem(at: demoDirectory)
    try FileManager.default.createDirectory(at: demoDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    let vaultURL = demoDirectory.appending(path: "vault.db")

    narrator.chapter("A development identity server and a fresh vault")
    let gateway = try await DevGateway.start(logger: quiet)
    narrator.say("identity gateway listening on \(gateway.baseURL.absoluteString)")
    let vault = try Vault.create(at: vaultURL, credential: .passphrase(passphrase), options: VaultOptions(logger: quiet))
    narrator.say("created \(vaultURL.path) (mode 0600, passphrase \"\(passphrase)\", Argon2id)")

    // Short timeouts for alice so the story fits in a minute; real tools keep the defaults (15 min idle…).
    let policy = SessionPolicy(
        idleTimeout: .seconds(6), warningBefore: .seconds(4), maxExtensions: 1,
        absoluteLifetime: .seconds(120), backgroundTimeout: .seconds(2), idleAction: .lock)
    var configuration = SessionConfiguration()
    configuration.observationInterval = .milliseconds(250)
    configuration.leeway = .seconds(2)  // bob's demo tokens live 4 s; real tokens live an hour
    let session = SessionService(vault: vault, oauth: OAuthClient(logger: quiet), configuration: configuration, logger: quiet)
    try await session.start()

    var accounts: [String: AccountID] = [:]
    accounts["alice"] = try await SignInChapter.run(gateway: gateway, session: session, narrator: narrator)

    narrator.chapter("bob's sign-in, done by another program, is imported")
    for subject in ["bob"] {
        // A sign-in another program did: its token response is imported (`vault accounts add`).
        // bob's access tokens live 4 s, so the story can show a refresh ahead of expiry.
        let lifetime: Duration = .seconds(4)
        let issued = await gateway.issueGrant(subject: subject, clientID: "vault-demo", accessTokenLifetime: lifetime)
        let response = TokenResponse(
            accessToken: issued.accessToken, tokenType: issued.tokenType, expiresIn: issued.expiresIn,
            refreshToken: issued.refreshToken, scope: issued.scope, idToken: issued.idToken)
        let account = try await session.signIn(
            NewAccount(
                issuer: gateway.baseURL.absoluteString, subject: subject, label: "\(subject.capitalized) (demo)",
                email: "\(subject)@demo.test",
                client: OAuthClientSettings(
                    tokenEndpoint: gateway.tokenEndpoint, revocationEndpoint: gateway.revocationEndpoint,
                    clientID: "vault-demo", scopes: ["openid", "profile"])),
            tokens: response, policy: SessionPolicy())
        accounts[subject] = account.id
        narrator.say("\(subject) signed in as account \(account.id); access token \(Narrator.fingerprint(issued.accessToken)) expires in \(issued.expiresIn) s")
    }
    guard let alice = accounts["alice"], let bob = accounts["bob"] else { return }
    narrator.say("active account: bob")

    narrator.chapter("Tokens refresh ahead of expiry, with rotation")
    let requestsBefore = await gateway.tokenRequestCount()  // the sign-ins' own token requests are not refreshes
    let before = try vault.tokens.current(for: bob)
    let first = try await session.validAccessToken()
    narrator.say("bob's token \(Narrator.fingerprint(first.value)) is served as is: it is fresh")
    narrator.say("waiting 2.5 s: the token nears its expiry…")
    try await Task.sleep(for: .milliseconds(2500))
    let token = try await session.validAccessToken()
    let after = try vault.tokens.current(for: bob)
    narrator.say("with less than the 2 s leeway left, it was refreshed before being served")
    narrator.say(
        "access token \(Narrator.fingerprint(before?.tokens.accessToken ?? "")) -> \(Narrator.fingerprint(token.value)) (generation \(token.generation))")
    narrator.say(
        "refresh token rotated \(Narrator.fingerprint(before?.tokens.refreshToken ?? "")) -> \(Narrator.fingerprint(after?.tokens.refreshToken ?? "")); the old one is now refused by the server"
    )
    async let concurrent = withThrowingTaskGroup(of: Int64.self) { group in
        for _ in 0..<50 { group.addTask { try await session.validAccessToken().generation } }
        return try await group.reduce(into: Set<Int64>()) { $0.insert($1) }
    }
    narrator.say(
        "50 concurrent callers got generation(s) \(try await concurrent.sorted()); server saw \(await gateway.tokenRequestCount() - requestsBefore) refresh request(s) in all"
    )

    try await session.switchAccount(to: alice)
    try await session.recordActivity()
    try await session.setSessionPolicy(policy, for: alice)
    narrator.say("active account: alice again, with short demo timeouts")

    narrator.chapter("Idle warning, a live countdown, and an extension")
    try await session.recordActivity()
    let events = session.events()  // from now on: warnings judged on the deadline that activity set
    narrator.say(
        "no activity for \(policy.idleTimeout.map { "\($0.components.seconds)" } ?? "-") s locks the session; a warning comes \(policy.warningBefore.components.seconds) s before"
    )
    var extended = false
    // A warning judged on an older deadline or session version than one this tool already knows
    // (raised just before an extension, delivered after it) is stale and is dropped, never shown.
    var filter = StaleWarningFilter()
    eventLoop: for await event in events where filter.admits(event) {
        guard case .idleWarning(let warning) = event else { continue }
        var left = warning.secondsLeft
        while left > 2 {
            narrator.countdown("idle warning: locking in \(left) s\(warning.canExtend ? " (can be extended)" : "")")
            try await Task.sleep(for: .seconds(1))
            left = Int(warning.deadline.timeIntervalSinceNow.rounded(.up))
        }
        narrator.countdown("idle warning: locking in \(left) s — extending")
        narrator.endCountdown()
        if !extended {
            extended = true
            let result = try await session.extendSession()
            if case .extended(let newDeadline, let remaining) = result {
                filter.learn(newDeadline, for: warning.account)
                narrator.say("extended: idle deadline moved \(Int(newDeadline.timeIntervalSinceNow.rounded())) s ahead; \(remaining) extension(s) left")
            }
        }
        break eventLoop
    }

    narrator.chapter("A hard timeout ends it")
    narrator.say("doing nothing now…")
    for await event in events where filter.admits(event) {
        if case .idleWarning(let warning) = event {
            narrator.say(
                "idle warning: \(warning.secondsLeft) s left, can extend: \(warning.canExtend)\(warning.canExtend ? "" : " (extension limit reached)")")
        }
        if case .hardTimeout(_, let reason) = event {
            narrator.say("hard timeout (\(reason)): the vault's keys were dropped from memory")
            break
        }
    }
    do {
        _ = try await session.validAccessToken()
    } catch {
        narrator.say("asking for a token now: \(error)")
    }
    try await session.unlock(with: .passphrase(passphrase))
    narrator.say("unlocked with the passphrase: \(try await session.status())")

    narrator.chapter("A background period locks it")
    try await session.enterBackground()
    narrator.say("the tool went to the background…")
    try await Task.sleep(for: .seconds(3))
    do {
        try await session.enterForeground()
    } catch let error as SessionError {
        narrator.say("back after 3 s (limit \(policy.backgroundTimeout.map { "\($0.components.seconds)" } ?? "-") s): \(error)")
    }
    narrator.say("status: \(try await session.status())")
    try await session.unlock(with: .passphrase(passphrase))
    narrator.say("unlocked again: \(try await session.status())")

    // The rest of the story is not about timeouts: alice goes back to the default 15-minute idle
    // timeout, her open session's deadlines with it (setting the policy alone left the 6 s idle
    // deadline of the unlock in place when the activity below fell within the write interval,
    // and the vault locked itself in the middle of the next chapters on a busy machine).
    try vault.sessions.changePolicy(SessionPolicy(), for: alice)
    try await session.recordActivity()

    try await DeviceChapter.run(
        gateway: gateway, vault: vault, session: session, accounts: accounts, policy: policy,
        directory: demoDirectory, narrator: narrator, logger: quiet)

    try await CommandLineChapter.run(gateway: gateway, directory: demoDirectory, narrator: narrator)

    narrator.chapter("An administrator revokes bob's grant")
    try await session.switchAccount(to: bob)
    let bobToken = try await session.validAccessToken()
    let revoked = await gateway.revokeGrants(subject: "bob", as: .administrator)
    narrator.say("gateway admin: revoked \(revoked) grant(s) of bob (answering later refreshes as Microsoft Entra ID documents it)")
    do {
        _ = try await session.reportUnauthorized(bobToken)
    } catch let error as SessionError {
        narrator.say("bob's API call was refused; the refresh got invalid_grant: \(error)")
    }
    narrator.say("bob's tokens in the vault: \(try vault.tokens.metadata(for: bob) == nil ? "wiped" : "still present")")
    try await session.switchAccount(to: alice)
    let aliceToken = try await session.validAccessToken()
    narrator.say("alice keeps working: token \(Narrator.fingerprint(aliceToken.value)), generation \(aliceToken.generation)")

    await session.stop()
    vault.close()
    await gateway.stop()
    narrator.chapter("Done")
}
