import Foundation
import VaultOAuth
import VaultSync
import VaultTestSupport
import VaultURLSession

/// A real `URLSessionTransport` that records the method and path of every request (never a
/// header or body), and can hold requests to one path until the test releases them, so a
/// test can have an answer truly in flight.
final class CountingTransport: HTTPTransport {
    private let base: URLSessionTransport
    private let sent = Watched<[String]>([])
    private let holds = Locked<(pathSuffix: String?, waiting: [CheckedContinuation<Void, Never>])>((nil, []))

    init(timeout: Duration = TestTimeScale.scaled(.seconds(10))) {
        base = URLSessionTransport(timeout: timeout)
    }

    /// `METHOD /path` of every request sent, in order.
    var requests: [String] { sent.value }

    /// How many requests went to a path ending in `suffix`.
    func count(_ method: String, pathSuffix suffix: String) -> Int {
        requests.filter { $0.hasPrefix(method + " ") && $0.hasSuffix(suffix) }.count
    }

    /// From now on, requests whose path ends in `suffix` wait for ``release()``.
    func hold(pathSuffix suffix: String) {
        holds.withLock { $0.pathSuffix = suffix }
    }

    /// Lets every held request go and stops holding.
    func release() {
        let waiting = holds.withLock { state -> [CheckedContinuation<Void, Never>] in
            defer { state = (nil, []) }
            return state.waiting
        }
        waiting.forEach { $0.resume() }
    }

    /// Waits until `count` requests to a path ending in `suffix` were sent (or are held).
    @discardableResult
    func waitForRequests(_ method: String, pathSuffix suffix: String, count: Int = 1) async -> Bool {
        await sent.wait { $0.filter { $0.hasPrefix(method + " ") && $0.hasSuffix(suffix) }.count >= count }
    }

    /// The network failing: the `number`th request (counting from 1, from now on) to a path
    /// ending in `suffix` times out without reaching the server.
    func timeOut(request number: Int, pathSuffix suffix: String) {
        failures.withLock { $0 = (suffix, number) }
    }
    private let failures = Locked<(pathSuffix: String, countdown: Int)?>(nil)

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let path = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.path ?? ""
        let fails = failures.withLock { plan -> Bool in
            guard let current = plan, path.hasSuffix(current.pathSuffix) else { return false }
            plan = current.countdown <= 1 ? nil : (current.pathSuffix, current.countdown - 1)
            return current.countdown <= 1
        }
        if fails {
            sent.update { $0.append("\(request.method) \(path) (timed out)") }
            throw TransportError.timedOut
        }
        let held = holds.withLock { $0.pathSuffix.map { path.hasSuffix($0) } ?? false }
        if held {
            await withCheckedContinuation { continuation in
                let stillHeld = holds.withLock { state -> Bool in
                    guard state.pathSuffix != nil else { return false }
                    state.waiting.append(continuation)
                    return true
                }
                sent.update { $0.append("\(request.method) \(path)") }
                if !stillHeld { continuation.resume() }
            }
        } else {
            sent.update { $0.append("\(request.method) \(path)") }
        }
        return try await base.send(request)
    }
}
