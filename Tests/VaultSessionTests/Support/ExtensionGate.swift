import Foundation
import VaultStore
import VaultTestSupport

/// An `extensionHandler` that holds every extension request until the test answers it,
/// standing in for a server round trip that is still in flight.
///
/// ```swift
/// let gate = ExtensionGate()
/// let service = SessionService(…, extensionHandler: gate.handler)
/// await gate.waitUntilAsked()
/// gate.answer(true)
/// ```
final class ExtensionGate: Sendable {
    private struct State {
        var asked = 0
        var pending: [CheckedContinuation<Bool, Never>] = []
    }

    private let state = Watched(State())

    var handler: @Sendable (AccountID) async -> Bool {
        { _ in
            await withCheckedContinuation { continuation in
                self.state.update {
                    $0.asked += 1
                    $0.pending.append(continuation)
                }
            }
        }
    }

    /// How many extension requests reached the handler.
    var asked: Int { state.value.asked }

    /// Waits until `count` requests reached the handler in total.
    func waitUntilAsked(_ count: Int = 1) async -> Bool {
        await state.wait { $0.asked >= count }
    }

    /// Answers every request waiting at the gate.
    func answer(_ confirmed: Bool) {
        var waiting: [CheckedContinuation<Bool, Never>] = []
        state.update { state in
            waiting = state.pending
            state.pending = []
        }
        waiting.forEach { $0.resume(returning: confirmed) }
    }
}
