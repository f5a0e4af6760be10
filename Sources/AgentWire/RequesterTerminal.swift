#if canImport(Glibc)
    import Glibc
#endif

/// Where the process asking the agent can be asked for the passphrase: its terminal, its
/// display and its desktop bus, sent with a request so that a locked agent can run pinentry
/// there (as gpg-agent gets `GPG_TTY`, `DISPLAY` and `DBUS_SESSION_BUS_ADDRESS`).
///
/// ```swift
/// var request = WireMessage()
/// request.append("op", "token")
/// RequesterTerminal.current()?.append(to: &request)   // nil under cron: nothing to ask on
/// ```
///
/// The terminal is `$VAULT_TTY` when set, else the process's controlling terminal (found
/// through `/proc/self/stat`, so it is found with standard input and output redirected, as
/// they are for a git credential helper). A process with no terminal and no display (cron, a service)
/// sends nothing, and a locked agent answers it as locked at once.
///
/// These are what the requester says of itself: the agent uses them only to decide where to
/// show a prompt to the same user (a peer of another uid is refused before any of this), and
/// checks that the terminal is a character device owned by the peer.
public struct RequesterTerminal: Sendable, Equatable {
    /// The terminal's device path (`/dev/pts/3`).
    public var tty: String?
    /// `$TERM` (pinentry-curses needs it to draw).
    public var termType: String?
    /// `$DISPLAY` (X11).
    public var display: String?
    /// `$WAYLAND_DISPLAY`.
    public var waylandDisplay: String?
    /// `$DBUS_SESSION_BUS_ADDRESS` (pinentry-gnome3 asks through the desktop's prompter).
    public var dbusAddress: String?
    /// `$LANG` / `$LC_ALL` / `$LC_CTYPE`, so pinentry can show the description's characters.
    public var locale: String?

    public init(
        tty: String? = nil, termType: String? = nil, display: String? = nil, waylandDisplay: String? = nil, dbusAddress: String? = nil,
        locale: String? = nil
    ) {
        self.tty = tty
        self.termType = termType
        self.display = display
        self.waylandDisplay = waylandDisplay
        self.dbusAddress = dbusAddress
        self.locale = locale
    }

    /// Whether there is anywhere to show a prompt.
    public var canPrompt: Bool { tty != nil || display != nil || waylandDisplay != nil }

    /// This process's terminal and display, or nil when it has neither (or `$VAULT_NO_PROMPT`
    /// is set to anything but `0` or empty).
    public static func current() -> RequesterTerminal? {
        if let noPrompt = variable("VAULT_NO_PROMPT"), noPrompt != "0" { return nil }
        let terminal = RequesterTerminal(
            tty: variable("VAULT_TTY") ?? controllingTerminal(), termType: variable("TERM"), display: variable("DISPLAY"),
            waylandDisplay: variable("WAYLAND_DISPLAY"), dbusAddress: variable("DBUS_SESSION_BUS_ADDRESS"),
            locale: variable("LC_ALL") ?? variable("LC_CTYPE") ?? variable("LANG"))
        return terminal.canPrompt ? terminal : nil
    }

    /// The device path of this process's controlling terminal, or nil when it has none: the
    /// name of a standard descriptor that is that terminal, else the device named by `tty_nr`
    /// in `/proc/self/stat` (`/dev/tty` itself names no device another process can open).
    public static func controllingTerminal() -> String? {
        guard let device = controllingDevice() else { return nil }
        for fd in [STDIN_FILENO, STDERR_FILENO, STDOUT_FILENO] where isatty(fd) == 1 {
            var info = stat()
            var name = [CChar](repeating: 0, count: 256)
            if fstat(fd, &info) == 0, info.st_rdev == device, ttyname_r(fd, &name, name.count) == 0 {
                return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
        }
        // Linux's device numbers: pseudo-terminals are majors 136–143, virtual consoles major 4.
        let major = (device >> 8) & 0xFFF
        let minor = (device & 0xFF) | ((device >> 12) & 0xFFF00)
        let path: String
        if (136...143).contains(major) {
            path = "/dev/pts/\((major - 136) * 256 + minor)"
        } else if major == 4, minor < 64 {
            path = "/dev/tty\(minor)"
        } else {
            return nil
        }
        var info = stat()
        guard stat(path, &info) == 0, info.st_rdev == device else { return nil }
        return path
    }

    /// `tty_nr` of `/proc/self/stat` (the seventh field), nil when 0 (no controlling terminal).
    static func controllingDevice() -> UInt64? {
        let fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0, let close = bytes[0..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After ") ": state, ppid, pgrp, session, tty_nr.
        let fields = bytes[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 4, let device = UInt64(String(decoding: fields[4], as: UTF8.self)), device != 0 else { return nil }
        return device
    }

    private static func variable(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }

    // MARK: - On the wire

    /// The fields a request carries (each at most ``maximumFieldLength`` bytes), and `waits`:
    /// the client reads interim `ok=wait` answers while a prompt is shown.
    public func append(to message: inout WireMessage) {
        message.append("tty", ifPresent: tty)
        message.append("term", ifPresent: termType)
        message.append("display", ifPresent: display)
        message.append("wayland_display", ifPresent: waylandDisplay)
        message.append("dbus_session", ifPresent: dbusAddress)
        message.append("locale", ifPresent: locale)
        message.append("waits", "1")
    }

    /// The terminal a request names, nil when it names none; a value that is too long or holds a
    /// control character is left out (it would reach pinentry's command line and environment).
    public init?(_ message: WireMessage) {
        func field(_ key: String) -> String? {
            guard let value = message[key], !value.isEmpty, value.utf8.count <= Self.maximumFieldLength,
                !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else { return nil }
            return value
        }
        self.init(
            tty: field("tty"), termType: field("term"), display: field("display"), waylandDisplay: field("wayland_display"),
            dbusAddress: field("dbus_session"), locale: field("locale"))
        guard canPrompt else { return nil }
    }

    /// The longest value of a terminal field the agent takes.
    public static let maximumFieldLength = 512
}
