// libFuzzer target: the agent's protocol-2 frame decoder (AgentWire/WireMessage.swift) on
// arbitrary frame bodies. Built by Fuzz/run.sh with that file under the fuzzer.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let body = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    do {
        let message = try WireMessage(body: body)
        // What the decoder accepts is exactly one encoding: written again, it is the same bytes,
        // so no two readers can see different fields in one frame.
        let frame = message.frame()
        precondition(Array(frame.dropFirst(4)) == body)
        precondition(WireMessage.readLength(frame, at: 0) == UInt32(body.count))
        for field in message.fields { precondition(message.values(field.key).count >= 1) }
    } catch {
        _ = String(describing: error)
    }
    return 0
}
