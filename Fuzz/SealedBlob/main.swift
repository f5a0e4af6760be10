// libFuzzer target: the sealed-blob parser (VaultCrypto/SealedBlob.swift) on arbitrary bytes.
// Built by Fuzz/run.sh with the VaultSync and VaultCrypto modules under the fuzzer (Fuzz/README.md).
@testable import VaultCrypto

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    // The in-place reader the vault opens values with agrees with the parser on every input.
    let inPlace = bytes.withUnsafeBytes { raw in Result { () throws(CryptoError) in try SealedBlob.keyID(of: raw) } }
    do {
        let blob = try SealedBlob(parsing: bytes)
        // A parsed blob's parts are exactly the input, in order.
        precondition(blob.version == SealedBlob.currentVersion)
        precondition(Array(blob.header) + Array(blob.nonce) + Array(blob.ciphertext) == bytes)
        precondition(blob.nonce.count == SealedBlob.nonceLength)
        precondition(blob.ciphertext.count >= SealedBlob.tagLength)
        precondition(blob.keyID == bytes[1..<5].reduce(0) { $0 << 8 | UInt32($1) })
        precondition((try? inPlace.get()) == blob.keyID)
    } catch {
        precondition(error.code == .malformedBlob)
        guard case .failure(let inPlaceError) = inPlace else { preconditionFailure("keyID(of:) read what the parser refused") }
        precondition(inPlaceError.code == .malformedBlob && inPlaceError.message == error.message)
        precondition(bytes.count < SealedBlob.minimumLength || bytes.first != SealedBlob.currentVersion)
    }
    return 0
}
