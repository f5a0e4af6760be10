import Foundation
import Testing
import VaultTestSupport

@_spi(RawWrites) @testable import VaultStore

/// The actions stored with a notification are read without a `JSONDecoder` when they are in the
/// form the vault writes (issue 16); whatever the input, the result must be `JSONDecoder`'s.
@Suite struct NotificationActionJSONTests {
    static let tricky: [[NotificationAction]] = [
        [],
        [NotificationAction(label: "Approve", action: "approve", authLevel: "high"), NotificationAction(label: "Deny", action: "deny")],
        [NotificationAction(label: "Say \"yes\" \\ or / no", action: "a/b\\c", authLevel: "line\nbreak\ttab")],
        [NotificationAction(label: "Grüße, 東京 🚀", action: "\u{0}\u{1F}\u{7F}", authLevel: "")],
        [NotificationAction(label: "e\u{301}", action: "\u{FEFF}x", authLevel: nil)],
    ]

    @Test("what JSONEncoder writes reads back the same, in a vault page too", arguments: Self.tricky)
    func encoderOutputRoundTrips(actions: [NotificationAction]) throws {
        let json = String(decoding: try JSONEncoder().encode(actions), as: UTF8.self)
        #expect(NotificationAction.list(fromJSON: json) == actions)

        let test = try TestVault(.keyFile)
        let vault = try test.create(clock: Times.fixedClock)
        let alice = try vault.accounts.insert(Samples.account("alice")).id
        try vault.notifications.upsert(
            NotificationRecord(uuid: "n-1", account: alice, subject: "s", message: "m", actions: actions, createdAt: Times.at(10)))
        #expect(try vault.notifications.page(NotificationQuery(limit: 5)).items.map(\.actions) == [actions])
        #expect(try vault.notifications.find("n-1", account: alice)?.actions == actions)
    }

    @Test(
        "any other JSON reads as JSONDecoder reads it (or is refused as it refuses it)",
        arguments: [
            #"[]"#, #" [ ] "#, #"[{"label":"A","action":"a"}]"#,
            " [ {\n \"action\" : \"a\" ,\t\"label\":\"A\" , \"authLevel\" : null } ] \n",
            #"[{"label":"A","action":"a","authLevel":"high","extra":1}]"#,
            #"[{"label":"A","action":"a","label":"B"}]"#,
            #"[{"label":"\u0041\u00e9\ud83d\ude80","action":"\/\b\f\n\r\t"}]"#,
            #"[{"label":"\ud83d","action":"a"}]"#, #"[{"label":"\ude80x","action":"a"}]"#,
            #"[{"label":"\u12","action":"a"}]"#, #"[{"label":"\x","action":"a"}]"#,
            #"[{"label":"A"}]"#, #"[{"label":null,"action":"a"}]"#, #"[{"label":1,"action":"a"}]"#,
            #"[{"label":"A","action":"a"},]"#, #"[{"label":"A","action":"a"}] x"#, #"{"label":"A","action":"a"}"#,
            "[{\"label\":\"A\u{1}\",\"action\":\"a\"}]", #"[{"label":"A","action":"a""#, "", "null",
            #"[{"l\u0061bel":"A","action":"a"}]"#, #"[{"labelx":"A","label":"A","action":"a"}]"#, #"[{"lab":"A","action":"a"}]"#,
        ])
    func sameAsJSONDecoder(json: String) {
        let decoded = try? JSONDecoder().decode([NotificationAction].self, from: Data(json.utf8))
        #expect(NotificationAction.list(fromJSON: json) == decoded)
    }
}
