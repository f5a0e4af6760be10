#if canImport(Glibc)
    import Glibc
#endif

/// Agent protocol 2: what a client sends first, the sizes both ends accept, and one blocking
/// request/answer exchange on a connected socket — shared by `AgentClient` and the lean client,
/// with no Foundation.
///
/// A client opens the connection with the 10-byte preface `CVAGENT/2\n` and then sends
/// request frames (``WireMessage``), each answered by one frame, in order, for as long as it
/// keeps the connection open (the agent closes a connection idle for a while). A client of a
/// later version sends its own preface; an agent that does not speak it answers one frame
/// `ok=0, error=unsupported_version, versions=…` (the frame format never changes) and closes.
/// An agent of protocol 1 (JSON lines) answers the preface with a JSON error line, which a
/// client recognises by its first byte `{` (``AgentConnectionError/olderAgent(_:)``).
public enum WireProtocol {
    /// The protocol version this build speaks on frames.
    public static let version = 2
    /// The versions an agent of this build answers (1: one JSON line per connection).
    public static let versions = [1, 2]
    /// What a client of this version sends first on a connection.
    public static let preface: [UInt8] = Array("CVAGENT/2\n".utf8)
    /// The prefix every version's preface shares.
    public static let prefacePrefix: [UInt8] = Array("CVAGENT/".utf8)
    /// The largest request frame the agent reads (length included); a larger one is refused.
    public static let maximumRequestSize = 64 * 1024
    /// The largest answer a client reads.
    public static let maximumResponseSize = 1 << 20
    /// The exit codes of the `vault` command (its `ExitStatus`, kept in step by a test): an
    /// agent's failure carries one, which the lean client exits with; any other becomes 1.
    public static let commandExitCodes: Set<Int32> = [
        1, 64, 65, 66, 67, 69, 70, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 130,
    ]

    /// What came back on a connection.
    public enum Answer: Sendable {
        /// A frame of protocol 2.
        case frame(WireMessage)
        /// One JSON line: an agent of protocol 1 (or its refusal of another uid), up to the newline.
        case jsonLine([UInt8])
        /// The connection closed before a byte of an answer (a kept connection the agent closed
        /// while idle: nothing was handled).
        case closed
    }

    /// Sends `request` on `fd` (after the preface when `preface` is true: the connection's first
    /// request) and reads the answer. Blocking: `fd` should carry send and receive timeouts
    /// (``setTimeouts(_:seconds:)``).
    public static func exchange(_ fd: Int32, _ request: WireMessage, preface: Bool) throws(AgentConnectionError) -> Answer {
        var out = preface ? Self.preface : []
        out.append(contentsOf: request.frame())
        guard writeAll(fd, out) else { return .closed }
        return try readAnswer(fd)
    }

    /// Reads one answer. Interim answers (`ok=wait`: the agent is showing a passphrase prompt
    /// for this request, sent only to a request that said `waits`) are read past; each one
    /// restarts the receive timeout, so a client waits as long as the agent keeps saying so.
    public static func readAnswer(_ fd: Int32) throws(AgentConnectionError) -> Answer {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var needed = 4
        var length: Int?
        while true {
            while buffer.count < needed {
                let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw .badAnswer("no answer in time") }
                    if buffer.isEmpty { return .closed }
                    throw .badAnswer("the connection closed in the middle of an answer")
                }
                buffer.append(contentsOf: chunk[0..<count])
                if buffer.first == UInt8(ascii: "{") {
                    if let newline = buffer.firstIndex(of: 0x0A) { return .jsonLine(Array(buffer[...newline])) }
                    guard buffer.count < maximumResponseSize else { throw .badAnswer("the answer is larger than \(maximumResponseSize) bytes") }
                    needed = buffer.count + 1
                    continue
                }
                if length == nil, buffer.count >= 4 {
                    let announced = Int(WireMessage.readLength(buffer, at: 0))
                    guard announced + 4 <= maximumResponseSize else { throw .badAnswer("the answer is larger than \(maximumResponseSize) bytes") }
                    length = announced
                    needed = 4 + announced
                }
            }
            let message: WireMessage
            do {
                message = try WireMessage(body: buffer[4..<needed])
            } catch {
                throw .badAnswer("\(error)")
            }
            guard message["ok"] == interimOK else {
                guard buffer.count == needed else { throw .badAnswer("more than one answer to one request") }
                return .frame(message)
            }
            // An interim answer: the final one (or another interim) follows.
            buffer.removeFirst(needed)
            (needed, length) = (4, nil)
            if buffer.count >= 4 {
                let announced = Int(WireMessage.readLength(buffer, at: 0))
                guard announced + 4 <= maximumResponseSize else { throw .badAnswer("the answer is larger than \(maximumResponseSize) bytes") }
                (needed, length) = (4 + announced, announced)
            }
        }
    }

    /// The `ok` value of an interim answer: the agent is asking for the passphrase (pinentry)
    /// before it can answer; the answer follows on the same connection.
    public static let interimOK = "wait"

    /// Sends `request`'s frame on a connection that already carried the preface without
    /// blocking (`MSG_DONTWAIT`); false when not all of it went (the connection is then unusable).
    public static func sendNow(_ fd: Int32, _ request: WireMessage) -> Bool {
        let frame = request.frame()
        var result: Int
        repeat {
            result = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
        } while result < 0 && errno == EINTR
        return result == frame.count
    }

    /// Whether bytes of an answer (or the connection's end) arrive on `fd` within `nanoseconds`,
    /// watched from the calling thread with `poll` and a timeout of 0: a bounded spin of CPU, no
    /// call that blocks. A warm answer arrives in tens of microseconds; waking a thread parked
    /// in `read` costs about as much again on an idle machine.
    public static func answerArrives(_ fd: Int32, withinNanoseconds limit: UInt64) -> Bool {
        let start = monotonicNanoseconds()
        var watched = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        repeat {
            if poll(&watched, 1, 0) > 0 { return true }
            // Any other runnable thread (the agent itself, on a busy machine) goes first.
            sched_yield()
        } while monotonicNanoseconds() - start < limit
        return false
    }

    static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// Sets the send and receive timeouts of `fd`.
    public static func setTimeouts(_ fd: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes all of `bytes`; false when the peer went away. No SIGPIPE (`MSG_NOSIGNAL`).
    @discardableResult
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
