/// Why a client could not talk to an agent.
public enum AgentConnectionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No agent listens there (no socket, or a stale one of a dead agent).
    case notRunning
    /// The socket is there but unusable (permissions, path length…).
    case unusable(String)
    /// Something at the agent's place fails a check (another user's directory or socket, a
    /// link, a listener of another uid): nothing was sent to it.
    case untrusted(String)
    /// The agent did not answer as the protocol says (cut off, timed out, not the protocol).
    case badAnswer(String)
    /// The agent speaks only an older version of the protocol (it was started by an older
    /// `vault`): nothing was asked of it.
    case olderAgent(Int)

    public var description: String {
        switch self {
        case .notRunning: "no agent is running for this vault"
        case .unusable(let reason): "the agent's socket cannot be used: \(reason)"
        case .untrusted(let reason): "refused to talk to the agent: \(reason); nothing was sent"
        case .badAnswer(let reason): "the agent did not answer: \(reason)"
        case .olderAgent(let version):
            "the running agent speaks protocol \(version), older than this client's \(WireProtocol.version) (an older build started it): restart the agent"
        }
    }
}
