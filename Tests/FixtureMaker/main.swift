// Writes the fixture vault of the CURRENT schema version with this build's code.
// Run through Tests/Fixtures/make-fixture.sh; a fixture that has landed is never rewritten.
//
//     FixtureMaker v17 Tests/Fixtures/vault-v17.db
import Foundation
import VaultCrypto
import VaultStore
import VaultTestSupport

let arguments = CommandLine.arguments
// Only the current schema version's fixture can be made: older ones came from older code.
guard arguments.count == 3, arguments[1] == "v17" else {
    FileHandle.standardError.write(Data("usage: FixtureMaker v17 OUTPUT.db (the current schema version)\n".utf8))
    exit(2)
}
let output = URL(fileURLWithPath: arguments[2])
do {
    let options = VaultOptions(clock: WallClock { FixtureV1.created }, kdf: .owaspFloor)
    let vault = try Vault.create(at: output, credential: .passphrase(FixtureV17.passphrase), options: options)
    try FixtureV17.populate(vault)
    vault.close()
    print("wrote \(output.path)")
} catch {
    FileHandle.standardError.write(Data("FixtureMaker: \(error)\n".utf8))
    exit(1)
}
