import Foundation
import VaultStore

/// A JSON value with its keys in the order written, so every `--json` shape is stable and
/// every documented key is present (absent values are `null`, never missing).
enum JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    case null
    case bool(Bool)
    case int(Int64)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int64) { self = .int(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
    init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(elements) }

    /// A string, or null.
    static func text(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
    /// A number, or null.
    static func number(_ value: (some BinaryInteger)?) -> JSONValue { value.map { .int(Int64($0)) } ?? .null }
    /// ISO 8601 in UTC to the second (`2026-01-31T09:30:00Z`), or null.
    static func date(_ value: Date?) -> JSONValue { value.map { .string(Format.iso8601($0)) } ?? .null }
    static func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }

    /// The object with `key` added last (any other value unchanged).
    func adding(_ key: String, _ value: JSONValue) -> JSONValue {
        guard case .object(let members) = self else { return self }
        return .object(members + [(key, value)])
    }

    /// Two-space indented text with a trailing newline.
    var rendered: String {
        var out = ""
        write(to: &out, indent: 0)
        return out + "\n"
    }

    /// One line, no spaces: a JSON Lines record.
    var compact: String {
        switch self {
        case .array(let items): return "[" + items.map(\.compact).joined(separator: ",") + "]"
        case .object(let members):
            return "{"
                + members.map { key, value in
                    var out = ""
                    Self.escape(key, into: &out)
                    return out + ":" + value.compact
                }.joined(separator: ",") + "}"
        default:
            var out = ""
            write(to: &out, indent: 0)
            return out
        }
    }

    private func write(to out: inout String, indent: Int) {
        let pad = String(repeating: "  ", count: indent + 1)
        let close = String(repeating: "  ", count: indent)
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .int(let value): out += String(value)
        case .string(let value): Self.escape(value, into: &out)
        case .array(let items):
            guard !items.isEmpty else {
                out += "[]"
                return
            }
            out += "[\n"
            for (index, item) in items.enumerated() {
                out += pad
                item.write(to: &out, indent: indent + 1)
                out += index == items.count - 1 ? "\n" : ",\n"
            }
            out += close + "]"
        case .object(let members):
            guard !members.isEmpty else {
                out += "{}"
                return
            }
            out += "{\n"
            for (index, (key, value)) in members.enumerated() {
                out += pad
                Self.escape(key, into: &out)
                out += ": "
                value.write(to: &out, indent: indent + 1)
                out += index == members.count - 1 ? "\n" : ",\n"
            }
            out += close + "}"
        }
    }

    private static func escape(_ text: String, into out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// How times, durations and sizes are shown.
enum Format {
    static func iso8601(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ", c.year ?? 0, c.month ?? 0, c.day ?? 0,
            c.hour ?? 0, c.minute ?? 0, c.second ?? 0)
    }

    /// "in 59 min", "3 h ago", "in 12 s".
    static func relative(_ date: Date, now: Date = CommandTime.wall.now()) -> String {
        let seconds = date.timeIntervalSince(now)
        let text = span(abs(seconds))
        return seconds >= 0 ? "in \(text)" : "\(text) ago"
    }

    /// A rounded length of time: "45 s", "59 min", "3 h", "2 d".
    static func span(_ seconds: TimeInterval) -> String {
        switch seconds {
        case ..<60: "\(Int(seconds)) s"
        case ..<3600: "\(Int(seconds / 60)) min"
        case ..<172_800: "\(Int(seconds / 3600)) h"
        default: "\(Int(seconds / 86_400)) d"
        }
    }

    static func span(_ duration: Duration) -> String {
        span(TimeInterval(duration.components.seconds))
    }

    static func bytes(_ count: Int64) -> String {
        switch count {
        case ..<1024: "\(count) bytes"
        case ..<(1024 * 1024): String(format: "%.1f KiB", Double(count) / 1024)
        default: String(format: "%.1f MiB", Double(count) / 1_048_576)
        }
    }
}
