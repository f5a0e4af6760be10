-- CredentialVault schema version 17: sensitive actions and a known refresh-token lifetime,
-- per account (issue 37).
--
-- Para's session model: an action the tool calls sensitive (`SessionService.recordSensitiveAction`,
-- `vault token --sensitive`) moves the session's absolute deadline to now + its lifetime, never
-- past the start + `sensitive_cap_ms`. NULL: a sensitive action is activity and nothing more
-- (every policy before this schema).
--
-- `refresh_lifetime_ms`: how long the provider lets a grant's refresh tokens live from the
-- sign-in, when it says so nowhere the vault can read (no JWT `exp`, no introspection, no
-- `refresh_expires_in`): the grant watch warns before the start + this. NULL: not known.
--
-- NULL in existing rows, and a NULL column does not enter a row's MAC, so policies
-- authenticated by schema 16 stay authentic; the row's MAC covers both once set, so an edited
-- file cannot stretch a session's lifetime through them.
ALTER TABLE session_policies ADD COLUMN sensitive_cap_ms INTEGER CHECK (sensitive_cap_ms IS NULL OR sensitive_cap_ms > 0);
ALTER TABLE session_policies ADD COLUMN refresh_lifetime_ms INTEGER CHECK (refresh_lifetime_ms IS NULL OR refresh_lifetime_ms > 0);
