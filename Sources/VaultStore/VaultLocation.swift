import Foundation

/// Where a vault lives when no path is given.
public enum VaultLocation {
    /// `$XDG_DATA_HOME/credentialvault/vault.db`, or `~/.local/share/credentialvault/vault.db`
    /// when `XDG_DATA_HOME` is unset or not absolute (XDG Base Directory Specification).
    public static func defaultURL(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        let base: URL
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            base = URL(fileURLWithPath: xdg, isDirectory: true)
        } else {
            let home = environment["HOME"] ?? NSHomeDirectory()
            base = URL(fileURLWithPath: home, isDirectory: true).appending(path: ".local/share", directoryHint: .isDirectory)
        }
        return base.appending(path: "credentialvault", directoryHint: .isDirectory).appending(path: "vault.db")
    }
}
