import Foundation

/// Which program asked the agent, for the passphrase prompt: the peer process's name and
/// those of its parents (`git-credential-vault ← git ← bash`), read from `/proc`.
///
/// A hint for the person at the prompt, never proof: a process names itself (its `argv[0]`),
/// so the prompt shows these as what the programs say they are, next to their pids. What is
/// trusted is the peer's uid, checked with `SO_PEERCRED` before anything is read.
public struct RequesterProcess: Sendable, Equatable {
    public struct Member: Sendable, Equatable {
        public var pid: Int32
        public var name: String
    }

    /// The peer first, then its parents (at most ``depth``), stopping at pid 1.
    public var chain: [Member]

    public init(chain: [Member]) {
        self.chain = chain
    }

    /// How many processes are named.
    public static let depth = 3

    /// The chain of `pid` as `/proc` tells it (empty when the process is gone).
    public init(pid: Int32, proc: URL = URL(fileURLWithPath: "/proc")) {
        var chain: [Member] = []
        var current = pid
        while chain.count < Self.depth, current > 1 {
            let directory = proc.appending(path: String(current))
            guard let name = Self.name(in: directory) else { break }
            chain.append(Member(pid: current, name: name))
            guard let parent = Self.parent(in: directory) else { break }
            current = parent
        }
        self.chain = chain
    }

    /// `git-credential-vault (pid 4242) ← git (pid 4240) ← bash (pid 4100)`.
    public var summary: String {
        chain.isEmpty ? "an unknown process" : chain.map { "\($0.name) (pid \($0.pid))" }.joined(separator: " ← ")
    }

    /// The base name of `argv[0]` (`comm` when the command line is unreadable), printable and short.
    static func name(in directory: URL) -> String? {
        var name: String?
        if let data = try? Data(contentsOf: directory.appending(path: "cmdline")), let first = data.split(separator: 0).first {
            let argument = String(decoding: first, as: UTF8.self)
            name = argument.split(separator: "/").last.map(String.init)
        }
        if name?.isEmpty ?? true, let comm = try? String(contentsOf: directory.appending(path: "comm"), encoding: .utf8) {
            name = comm.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        guard let name, !name.isEmpty else { return nil }
        // No control or format character (C0, C1, bidirectional overrides…): nothing that could
        // change how the prompt reads.
        let printable = String(
            name.unicodeScalars.filter {
                $0.value != 0x25 && $0.properties.generalCategory != .control && $0.properties.generalCategory != .format
            }.map(Character.init))
        return String(printable.prefix(48))
    }

    /// The parent's pid: the fourth field of `stat`, after the name in parentheses (which may
    /// itself hold spaces and parentheses: read from the last `)`).
    static func parent(in directory: URL) -> Int32? {
        guard let stat = try? String(contentsOf: directory.appending(path: "stat"), encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 1 else { return nil }
        return Int32(fields[1])
    }
}
