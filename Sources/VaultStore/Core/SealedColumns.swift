/// Every column that holds a sealed value, with what its associated data binds it to.
/// Key rotation re-seals them and `verify` opens them; a new sealed column is added here.
struct SealedColumns: Sendable {
    var table: String
    var columns: [String]
    /// The column naming the row in the associated data.
    var rowColumn: String
    /// The column whose value is bound as the version (tokens: the generation), if any.
    var versionColumn: String?

    static let all: [SealedColumns] = [
        SealedColumns(table: "accounts", columns: ["label", "email", "client_secret", "client_signing_key", "dpop_key"], rowColumn: "account_id"),
        SealedColumns(
            table: "tokens", columns: ["access_token", "refresh_token", "id_token"], rowColumn: "account_id",
            versionColumn: "generation"),
        SealedColumns(
            table: "resource_tokens", columns: ["access_token"], rowColumn: "token_id", versionColumn: "generation"),
        SealedColumns(table: "refresh_state", columns: ["last_failure_detail"], rowColumn: "account_id"),
        SealedColumns(table: "devices", columns: ["name", "status_detail"], rowColumn: "registration_id"),
        SealedColumns(table: "notifications", columns: ["subject", "message", "actions", "action_taken"], rowColumn: "uuid"),
        SealedColumns(table: "events", columns: ["detail"], rowColumn: "seq"),
    ]
}
