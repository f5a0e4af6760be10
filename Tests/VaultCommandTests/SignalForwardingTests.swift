import CProcessControl
import Foundation
import Testing
import VaultTestSupport

/// `vault exec` installs its forwarding handlers before the child exists and names the child
/// once it runs: a signal that arrives in between must reach the child, once. The whole command
/// is tested in `AgentCommandTests.exec`; the gap, which a test cannot hit from outside, here.
@Suite("Signal forwarding to exec's child")
struct SignalForwardingTests {
    @Test("a signal that arrives before the child exists reaches it once it does, once")
    func earlySignalIsKeptForTheChild() async throws {
        var signals = [SIGUSR2]
        #expect(cv_forward_signals(&signals, 1) == 0)
        defer {
            cv_set_forward_target(0)
            signal(SIGUSR2, SIG_DFL)
        }
        // No target yet: the handler keeps it.
        await raiseOnAThreadThatTakesIt(SIGUSR2)
        // The child says each USR2 it gets, and exits with their count once told to stop (TERM).
        let child = try ChildProgram(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", #"n=0; trap 'n=$((n+1)); echo "usr2 $n"' USR2; trap 'exit $((40+n))' TERM; echo ready; while :; do sleep 0.05; done"#])
        #expect(await child.waitForLine { $0 == "ready" })
        cv_set_forward_target(child.processIdentifier)
        #expect(await child.waitForLine { $0 == "usr2 1" }, "the signal kept before the child existed reaches it")
        // A signal now goes straight to the child (after the first was taken: two pending
        // signals of one kind would merge into one).
        await raiseOnAThreadThatTakesIt(SIGUSR2)
        #expect(await child.waitForLine { $0 == "usr2 2" })
        kill(child.processIdentifier, SIGTERM)
        #expect(await child.output.wait(upTo: TestTimeScale.scaled(.seconds(30))) { $0.exitStatus != nil })
        #expect(child.output.value.exitStatus == 42, "each signal delivered once: \(child.output.value.lines)")
    }
}

/// Raises `signal` on a thread of its own that does not block it, and returns once the handler
/// ran there (`raise` returns after the handler). A test's task runs on a libdispatch worker
/// thread, which blocks asynchronous signals: raised there, the signal would only wait.
func raiseOnAThreadThatTakesIt(_ signal: Int32) async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, signal)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            raise(signal)
            done.resume()
        }
    }
}
