import AgentWire
import Foundation
import Logging
import VaultAgent
import VaultCrypto
import VaultSession
import VaultStore

#if canImport(Glibc)
    import Glibc
    import CoreFoundation
#endif

/// Unlock on demand: a request that meets the locked agent and names where its sender can be
/// asked (a terminal or a display) has the agent run pinentry there; the passphrase goes from
/// pinentry to the agent on a pipe, never through the socket.
///
/// One prompt at a time: requests arriving meanwhile wait for its outcome. Each prompt is
/// bounded (pinentry's own timeout, and the program ended a few seconds after it), Cancel is
/// answered as locked at once, and a wrong passphrase is asked again after a delay that doubles
/// with each wrong one since the last unlock, at most ``attemptsPerPrompt`` times per prompt.
extension AgentHost {
    enum PromptOutcome: Sendable {
        case unlocked
        case refused(AgentResponse)
    }

    /// Passphrases asked for in one prompt before the request is answered as refused.
    static let attemptsPerPrompt = 3

    /// The wait before asking again after the `count`th wrong passphrase in a row: 1 s, 2 s,
    /// 4 s… at most 30 s (each attempt also costs a key derivation).
    static func delay(afterWrong count: Int) -> Duration {
        .seconds(min(30, 1 << min(max(count - 1, 0), 5)))
    }

    /// Unlocks through pinentry on `terminal`, or waits for the prompt already shown.
    /// Unlocks through pinentry on `terminal`, or waits for the prompt already shown. The
    /// request is told `ok=wait` meanwhile (``AgentServer/whileAskingAPerson(_:)``).
    func askToUnlock(_ terminal: RequesterTerminal, peer: AgentServer.Peer) async -> PromptOutcome {
        let task: Task<PromptOutcome, Never>
        if let prompting {
            task = prompting
        } else {
            // Runs on this actor: it cannot end (and clear `prompting`) before it is recorded.
            task = Task {
                let outcome = await self.prompt(terminal, peer: peer)
                self.prompting = nil
                return outcome
            }
            prompting = task
        }
        return await AgentServer.whileAskingAPerson { await task.value }
    }

    private func prompt(_ terminal: RequesterTerminal, peer: AgentServer.Peer) async -> PromptOutcome {
        let pinentry: Pinentry
        switch self.pinentry {
        case .success(let found): pinentry = found
        case .failure(.missing(let name)):
            return .refused(
                lockedAnswer(
                    "it cannot ask for the passphrase: no pinentry program (\(name)) is installed: \(Pinentry.installHint), or `vault agent start --pinentry PROGRAM`"
                ))
        case .failure(let unavailable): return .refused(lockedAnswer("it cannot ask for the passphrase: \(unavailable)"))
        }
        let (url, options) = (self.url, global.storeOptions())
        if let facts = try? await BlockingWork.run({ try Vault.inspect(at: url, options: options) }), case .keyFile = facts.unlockMethod {
            return .refused(lockedAnswer("the vault is unlocked with a key file, not a passphrase: `vault unlock --key-file PATH`"))
        }
        var terminal = terminal
        // /proc and the file system: not on the event loop this actor's tasks may run on.
        let askedTTY = terminal.tty
        let (requester, checkedTTY) =
            (try? await BlockingWork.run {
                (RequesterProcess(pid: peer.pid), askedTTY.flatMap { Self.terminalPath($0, ownedBy: peer.uid) })
            }) ?? (RequesterProcess(chain: []), nil)
        if let tty = terminal.tty {
            // Gone, or not a terminal of the requester's: never written to.
            terminal.tty = checkedTTY
            guard terminal.canPrompt else {
                return .refused(lockedAnswer("its requester's terminal \(tty) is gone or not a terminal of uid \(peer.uid)"))
            }
        }
        let conversation: PinentryConversation
        do {
            // posix_spawn and its pipes: off this actor's executor, which may be an event loop.
            let ready = terminal
            conversation = try await BlockingWork.run { try pinentry.start(on: ready, environment: ProcessInfo.processInfo.environment) }
        } catch {
            return .refused(answer(for: error, pinentry: pinentry))
        }
        logger.info("asking for the passphrase", metadata: ["pinentry": "\(pinentry.program.path)", "requester": "\(requester.summary)"])
        self.conversation = conversation
        var outcome = await converse(conversation, pinentry: pinentry, requester: requester)
        self.conversation = nil
        await conversation.finish()
        // Unlocked another way while the prompt was up (which ended it): the request is served.
        if case .refused = outcome, isOpen { outcome = .unlocked }
        return outcome
    }

    /// How long pinentry may take to greet and take its options and texts (no person involved;
    /// never longer than the prompt's own timeout).
    static let startBound = Duration.seconds(10)

    /// Ends a prompt being shown (the agent is stopping): its requests are answered as locked.
    func endPrompt() {
        conversation?.terminate()
    }

    private func converse(_ conversation: PinentryConversation, pinentry: Pinentry, requester: RequesterProcess) async -> PromptOutcome {
        do {
            try await bounded(conversation, min(Self.startBound, pinentry.timeout)) { try await conversation.open() }
            let path = url.path.count > 200 ? "…" + url.path.suffix(199) : url.path
            try await bounded(conversation, min(Self.startBound, pinentry.timeout)) {
                try await conversation.describe(
                    title: "CredentialVault",
                    description: """
                        The vault \(path) is locked.
                        Asked by: \(requester.summary) (as those programs name themselves).

                        Type its passphrase to unlock it.
                        """,
                    prompt: "Passphrase:")
            }
            var error: String?
            for attempt in 1...Self.attemptsPerPrompt {
                if wrongInARow > 0 { try? await clock.sleep(for: Self.delay(afterWrong: wrongInARow)) }
                let credential = try await typedCredential(conversation, error: error, bound: pinentry.timeout + .seconds(5))
                do {
                    try await unlock(resumingSessions: true) { _ in credential }
                    wrongInARow = 0
                    return .unlocked
                } catch let failure as VaultError where failure.code == .wrongCredential {
                    wrongInARow += 1
                    error = "Wrong passphrase (\(attempt) of \(Self.attemptsPerPrompt)); try again."
                    logger.info("wrong passphrase at the prompt", metadata: ["attempt": "\(attempt)"])
                } catch {
                    return .refused(Self.failure(error))
                }
            }
            return .refused(
                .failure(
                    "wrong_passphrase", exit: ExitStatus.wrongCredential.rawValue,
                    "\(Self.attemptsPerPrompt) wrong passphrases at the prompt: the agent for \(url.path) stays locked (the next prompt waits \(Self.delay(afterWrong: wrongInARow).components.seconds) s first)"
                ))
        } catch let failure as PinentryFailure {
            return .refused(answer(for: failure, pinentry: pinentry))
        } catch {
            return .refused(Self.failure(error))
        }
    }

    /// `step` of the conversation under a bound on the agent's clock: the program is ended when
    /// it runs out, so every wait on it ends.
    private func bounded<T: Sendable>(_ conversation: PinentryConversation, _ bound: Duration, _ step: () async throws -> T) async throws -> T {
        let clock = self.clock
        let watchdog = Task {
            try? await clock.sleep(for: bound)
            if !Task.isCancelled { conversation.terminate() }
        }
        defer { watchdog.cancel() }
        return try await step()
    }

    /// One `GETPIN` under its bound, the bytes turned into a credential and wiped.
    private func typedCredential(_ conversation: PinentryConversation, error: String?, bound: Duration) async throws -> VaultCredential {
        var typed = try await bounded(conversation, bound) { try await conversation.passphrase(error: error) }
        defer { SecureBytes.zero(&typed) }
        guard !typed.isEmpty else { throw PinentryFailure.cancelled }
        return try .passphrase(bytes: typed)
    }

    private func answer(for failure: any Error, pinentry: Pinentry) -> AgentResponse {
        switch failure as? PinentryFailure {
        case .cancelled: lockedAnswer("the passphrase prompt was cancelled")
        case .timedOut: lockedAnswer("no passphrase was typed within \(pinentry.timeout.components.seconds) s")
        case .failed(let reason): lockedAnswer("it could not ask for the passphrase: \(pinentry.program.lastPathComponent): \(reason)")
        case nil: lockedAnswer("it could not ask for the passphrase: \(failure)")
        }
    }

    private func lockedAnswer(_ reason: String) -> AgentResponse {
        .failure("locked", exit: ExitStatus.sessionLocked.rawValue, "the agent for \(url.path) stays locked: \(reason); `vault unlock` unlocks it")
    }

    /// `path` resolved, when it is a terminal of `uid`'s: a pseudo-terminal (`/dev/pts/N`) or a
    /// virtual console (`/dev/ttyN`), a character device owned by `uid`. Nil otherwise: a link
    /// to anything else (`/dev/stdin`, `/dev/fd/N`, a file) is never handed to pinentry.
    static func terminalPath(_ path: String, ownedBy uid: UInt32) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        let real = String(cString: resolved)
        let number: Substring? =
            real.hasPrefix("/dev/pts/") ? real.dropFirst("/dev/pts/".count) : real.hasPrefix("/dev/tty") ? real.dropFirst("/dev/tty".count) : nil
        guard let number, !number.isEmpty, number.allSatisfy(\.isASCII), number.allSatisfy(\.isNumber) else { return nil }
        var info = stat()
        guard stat(real, &info) == 0, (info.st_mode & S_IFMT) == S_IFCHR, info.st_uid == uid else { return nil }
        return real
    }
}
