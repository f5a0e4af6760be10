import Foundation

/// Placeholder for a secret value: says how long it was and nothing else.
func redacted(_ secret: String) -> String {
    "<redacted \(secret.utf8.count) bytes>"
}

extension String {
    /// Server-supplied text made safe to show: control characters dropped, length capped,
    /// and any of `secrets` replaced by a placeholder (a server may echo what it was sent).
    func sanitized(removing secrets: [String] = [], limit: Int = 512) -> String {
        var text = String(String.UnicodeScalarView(unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
        for secret in secrets where !secret.isEmpty {
            text = text.replacingOccurrences(of: secret, with: "<redacted>")
        }
        if text.count > limit {
            text = String(text.prefix(limit)) + "…"
        }
        return text
    }
}
