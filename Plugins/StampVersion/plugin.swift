import Foundation
import PackagePlugin

/// Generates `BuildVersion.swift` (`let buildVersion = "…"`) for `vault --version` from the
/// clone's git tags: `v1.2.3` → `1.2.3`, commits after it → `1.2.3-4-gabcdef0`, no tag →
/// `0.0.0-dev+gabcdef0`, uncommitted changes → `…-dirty`, no git at all (a source tarball) →
/// `0.0.0-unknown`. A prebuild command, run before every build; it rewrites the file only when
/// the version changed, so an unchanged tree recompiles nothing.
@main
struct StampVersion: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "Stamped")
        let script = #"""
            mkdir -p "$2" && out="$2/BuildVersion.swift"
            v=$(git -C "$1" describe --tags --always --dirty --match 'v[0-9]*' 2>/dev/null) || v=""
            case "$v" in v[0-9]*) v="${v#v}" ;; "") v="0.0.0-unknown" ;; *) v="0.0.0-dev+g$v" ;; esac
            line="let buildVersion = \"$v\""
            if [ ! -f "$out" ] || [ "$(cat "$out")" != "$line" ]; then printf '%s\n' "$line" > "$out"; fi
            """#
        return [
            .prebuildCommand(
                displayName: "Stamping the version from git",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "stamp-version", context.package.directoryURL.path(), output.path()],
                outputFilesDirectory: output)
        ]
    }
}
