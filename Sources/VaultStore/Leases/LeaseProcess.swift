import Foundation

/// Which process holds a refresh lease: the boot it runs in, its pid and its start time, as
/// stored in `refresh_state.lease_process` (`BOOT_ID PID START_TIME`).
///
/// A pid alone is not enough: after the holder dies its pid may be reused. The start time
/// (clock ticks since boot, field 22 of `/proc/PID/stat`) tells the two apart, and the boot id
/// tells a holder from before a reboot, or from another machine sharing the file, from one of
/// this boot: for those nothing can be known, and only the lease's expiry decides.
///
/// ```swift
/// let me = LeaseProcess.current
/// if let holder = LeaseProcess(stored), holder.isGone { /* take the lease over */ }
/// ```
struct LeaseProcess: Sendable, Hashable, CustomStringConvertible {
    var bootID: String
    var pid: Int32
    var startTime: UInt64

    /// This process, read once.
    static let current: LeaseProcess? = {
        let pid = getpid()
        guard let boot = bootID(), let start = startTime(of: pid) else { return nil }
        return LeaseProcess(bootID: boot, pid: pid, startTime: start)
    }()

    init(bootID: String, pid: Int32, startTime: UInt64) {
        self.bootID = bootID
        self.pid = pid
        self.startTime = startTime
    }

    /// Parses the stored form; nil for anything else.
    init?(_ stored: String) {
        let parts = stored.split(separator: " ")
        guard parts.count == 3, let pid = Int32(parts[1]), pid > 0, let start = UInt64(parts[2]) else { return nil }
        self.init(bootID: String(parts[0]), pid: pid, startTime: start)
    }

    var description: String { "\(bootID) \(pid) \(startTime)" }

    /// True only when the holder is known to have ended: same boot, and its pid is gone or now
    /// belongs to a process that started at another time. False when it runs, or when it cannot
    /// be known (another boot or machine, no /proc).
    var isGone: Bool {
        guard let me = Self.current, me.bootID == bootID else { return false }
        if pid == me.pid { return startTime != me.startTime }
        guard let start = Self.startTime(of: pid) else {
            // No /proc entry: the process is gone (kill(pid, 0) agrees unless /proc is unmounted).
            return kill(pid, 0) != 0 && errno == ESRCH
        }
        return start != startTime
    }

    private static func bootID() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return nil }
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty || id.contains(" ") ? nil : id
    }

    /// Field 22 of `/proc/PID/stat`. The second field (the command name, in parentheses) may
    /// hold spaces and parentheses itself, so fields are counted after the last ')'.
    static func startTime(of pid: Int32) -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After ')' come fields 3, 4, …: field 22 is at offset 19.
        guard fields.count > 19 else { return nil }
        return UInt64(fields[19])
    }
}
