import Foundation

/// One case's counts, as `make stress` prints and records them.
struct StressCount: Codable, Sendable {
    /// The case, named by its number in issue 7 and a few words.
    var `case`: String
    /// Attempts made (kills, rotations, operations…).
    var tried: Int
    /// Attempts after which every check held.
    var passed: Int
    /// Committed data found missing (a lost update, a token gone).
    var lost: Int
    /// Things that should not have survived or escaped (a second token, a replayed token,
    /// a SQLITE_BUSY reaching a caller, a half-applied step).
    var leaked: Int
}

/// Appends counts to `.stress/results.json` (a JSON list; `results.tsv` next to it holds the same
/// rows as text) under `make stress`; does nothing in
/// `make test`. Several test processes or tasks may append at once: the file is locked meanwhile.
enum StressResults {
    /// `$STRESS_RESULTS`, else `.stress/results.json` in the current directory (the package root
    /// under `swift test`).
    static var url: URL {
        if let path = ProcessInfo.processInfo.environment["STRESS_RESULTS"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appending(path: ".stress/results.json")
    }

    static func record(_ count: StressCount) {
        guard StressScale.current.reports else { return }
        let url = url
        try? FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let lock = open(url.path + ".lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lock >= 0 else { return }
        defer { close(lock) }
        flock(lock, LOCK_EX)
        defer { flock(lock, LOCK_UN) }
        var list = (try? JSONDecoder().decode([StressCount].self, from: Data(contentsOf: url))) ?? []
        // A parameterized test records once per argument under one case name: the counts add up.
        if let index = list.firstIndex(where: { $0.case == count.case }) {
            list[index].tried += count.tried
            list[index].passed += count.passed
            list[index].lost += count.lost
            list[index].leaked += count.leaked
        } else {
            list.append(count)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        if let data = try? encoder.encode(list) { try? data.write(to: url, options: .atomic) }
        // The same rows as tab-separated text, for `make stress` to print without a JSON tool.
        let table = url.deletingPathExtension().appendingPathExtension("tsv")
        let rows = list.map { "\($0.case)\t\($0.tried)\t\($0.passed)\t\($0.lost)\t\($0.leaked)\n" }.joined()
        try? Data(rows.utf8).write(to: table, options: .atomic)
        print("stress \(count.case): tried \(count.tried) passed \(count.passed) lost \(count.lost) leaked \(count.leaked)")
    }
}
