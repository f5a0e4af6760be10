// example-check: runs client-tool against the development gateway on loopback, playing the
// user (approving the device code) and the server (refusing the first access token once), and
// checks what a user would: signed in, the API answers, a 401 is recovered by one refresh.
// `make example` (and CI) runs it; it exits non-zero when anything is off.
import DevGateway
import Foundation
import Logging

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("example-check: FAILED: \(message)\n".utf8))
    exit(1)
}

/// Runs client-tool ARGUMENTS; calls `onLine` for each line of its standard output as it comes.
func runTool(_ arguments: [String], home: URL, onLine: @escaping @Sendable (String) async -> Void = { _ in }) async throws
    -> (status: Int32, output: [String], errors: String)
{
    let tool = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appending(path: "client-tool")
    let process = Process()
    process.executableURL = tool
    process.arguments = arguments
    process.environment = ["HOME": home.path, "PATH": "/usr/bin:/bin"]
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let lines = AsyncStream<String> { continuation in
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                pending += chunk
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    continuation.yield(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
            continuation.finish()
        }
    }
    var seen: [String] = []
    for await line in lines {
        print("  client-tool> \(line)")
        seen.append(line)
        await onLine(line)
    }
    let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    for line in errorText.split(separator: "\n") { print("  client-tool! \(line)") }
    process.waitUntilExit()
    return (process.terminationStatus, seen, errorText)
}

let home = URL(fileURLWithPath: NSTemporaryDirectory()).appending(path: "client-tool-check-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
defer { try? FileManager.default.removeItem(at: home) }
var quiet = Logger(label: "example-check.gateway")
quiet.logLevel = .critical
let gateway = try await DevGateway.start(logger: quiet)
await gateway.setDeviceGrantSettings(interval: 0)
await gateway.registerClient(id: "client-tool")  // a public client: no secret
let issuer = gateway.baseURL.absoluteString
let api = gateway.baseURL.appending(path: "api/profile").absoluteString

print("== client-tool login (the check approves the device code as alice)")
let login = try await runTool(["login", "--issuer", issuer], home: home) { line in
    guard let code = line.split(separator: " ").last.map(String.init), line.contains("enter the code") else { return }
    _ = await gateway.approveDeviceCode(userCode: code, subject: "alice")
}
guard login.status == 0, login.output.contains(where: { $0.hasPrefix("Signed in as") }) else { fail("login: \(login)") }

print("== client-tool profile")
let first = try await runTool(["profile", "--api", api], home: home)
guard first.status == 0, first.output.contains(where: { $0.contains("\"sub\":\"alice\"") }) else { fail("profile: \(first)") }

print("== the server invalidates alice's access token; client-tool profile again")
await gateway.invalidateAccessTokens(subject: "alice")
let refreshesBefore = await gateway.stats().tokenRequests
let second = try await runTool(["profile", "--api", api], home: home)
guard second.status == 0, second.output.contains(where: { $0.contains("refreshing and retrying") }),
    second.output.contains(where: { $0.contains("\"sub\":\"alice\"") })
else { fail("profile after a 401: \(second)") }
guard second.errors.contains("tokenRefreshed") else { fail("the refresh was not seen in the event stream: \(second.errors)") }
let refreshes = await gateway.stats().tokenRequests - refreshesBefore
guard refreshes == 1 else { fail("expected one refresh for the 401, saw \(refreshes)") }
let stats = await gateway.stats()
guard stats.resourceRequests == 3, stats.resourceRefusals == 1 else { fail("resource requests \(stats.resourceRequests), refusals \(stats.resourceRefusals)") }

await gateway.stop()
print("example-check: passed (signed in by device code, API answered, one 401 recovered by exactly one refresh)")
