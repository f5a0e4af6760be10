import Foundation

// MARK: - Reading the stored list of actions

extension NotificationAction {
    /// The actions of a notification from the JSON stored (sealed) in its `actions` column;
    /// nil when it is not a list of actions.
    ///
    /// A page of 50 notifications decoded each list with a `JSONDecoder`: a fifth of the page's
    /// time (issue 16). The list the vault writes (`JSONEncoder`: an array of objects with
    /// string `label`, `action` and optional `authLevel`) is read here directly; anything else
    /// (other keys, other value types, a duplicate key, a malformed escape) goes to
    /// `JSONDecoder`, so the result is always the one `JSONDecoder` gives.
    ///
    /// ```swift
    /// let actions = NotificationAction.list(fromJSON: #"[{"label":"Deny","action":"deny"}]"#)
    /// ```
    static func list(fromJSON json: String) -> [NotificationAction]? {
        var json = json
        if let actions = json.withUTF8({ bytes in
            var scanner = ActionListScanner(bytes: bytes)
            return scanner.scan()
        }) {
            return actions
        }
        return try? JSONDecoder().decode([NotificationAction].self, from: Data(json.utf8))
    }
}

/// A strict reader of `[{"label": "…", "action": "…", "authLevel": "…"|null}, …]`: nil as soon
/// as the input is anything else, for `JSONDecoder` to judge.
private struct ActionListScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    mutating func scan() -> [NotificationAction]? {
        skipSpace()
        guard take(UInt8(ascii: "[")) else { return nil }
        var actions: [NotificationAction] = []
        actions.reserveCapacity(4)
        skipSpace()
        if take(UInt8(ascii: "]")) { return finished() ? actions : nil }
        while true {
            guard let action = object() else { return nil }
            actions.append(action)
            skipSpace()
            if take(UInt8(ascii: ",")) {
                skipSpace()
                continue
            }
            guard take(UInt8(ascii: "]")) else { return nil }
            return finished() ? actions : nil
        }
    }

    private mutating func object() -> NotificationAction? {
        guard take(UInt8(ascii: "{")) else { return nil }
        var label: String?
        var action: String?
        var authLevel: String??
        skipSpace()
        if !take(UInt8(ascii: "}")) {
            while true {
                skipSpace()
                // The key compared as bytes: no String is made for it.
                guard let key = plainKey() else { return nil }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                switch key {
                case .label:
                    guard label == nil, let value = string() else { return nil }
                    label = value
                case .action:
                    guard action == nil, let value = string() else { return nil }
                    action = value
                case .authLevel:
                    guard authLevel == nil else { return nil }
                    if takeNull() {
                        authLevel = .some(nil)
                    } else {
                        guard let value = string() else { return nil }
                        authLevel = .some(value)
                    }
                }
                skipSpace()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                break
            }
        }
        guard let label, let action else { return nil }
        return NotificationAction(label: label, action: action, authLevel: authLevel ?? nil)
    }

    private enum Key {
        case label, action, authLevel
    }

    /// One of the three keys, written without escapes; nil for anything else (another key, or
    /// one spelled with escapes, is left to `JSONDecoder`).
    private mutating func plainKey() -> Key? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") { index += 1 }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let name = UnsafeBufferPointer(rebasing: bytes[start..<index])
        index += 1
        // By length, then byte for byte: a generic `elementsEqual` over a static table of keys
        // was a quarter of reading a page's actions.
        switch name.count {
        case 5 where Self.same(name, "label"): return .label
        case 6 where Self.same(name, "action"): return .action
        case 9 where Self.same(name, "authLevel"): return .authLevel
        default: return nil
        }
    }

    /// Whether `name` is exactly `key`'s UTF-8.
    private static func same(_ name: UnsafeBufferPointer<UInt8>, _ key: StaticString) -> Bool {
        key.withUTF8Buffer { key in
            guard key.count == name.count else { return false }
            for index in 0..<key.count where key[index] != name[index] { return false }
            return true
        }
    }

    /// A JSON string; nil for anything JSON does not allow in one.
    private mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        // The common case: no escape, so the bytes are the string's UTF-8.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { return nil }
            index += 1
        }
        var utf8 = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(validating: utf8, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return nil }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escaped)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return nil }
                    utf8.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: return nil
                }
            default:
                if byte < 0x20 { return nil }
                utf8.append(byte)
            }
        }
        return nil
    }

    /// After `\u`: four hex digits, or a surrogate pair written as two escapes.
    private mutating func unicodeEscape() -> Unicode.Scalar? {
        guard let high = hex4() else { return nil }
        if (0xD800...0xDBFF).contains(high) {
            guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        }
        return Unicode.Scalar(high)
    }

    private mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            index += 1
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    private mutating func takeNull() -> Bool {
        guard index + 4 <= bytes.count, bytes[index] == UInt8(ascii: "n"), bytes[index + 1] == UInt8(ascii: "u"),
            bytes[index + 2] == UInt8(ascii: "l"), bytes[index + 3] == UInt8(ascii: "l")
        else { return false }
        index += 4
        return true
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func finished() -> Bool {
        skipSpace()
        return index == bytes.count
    }
}
