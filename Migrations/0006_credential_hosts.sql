-- CredentialVault schema version 6: which hosts an account's tokens are handed to by the git
-- and docker credential helpers (`vault accounts set-host`).
--
-- Both columns are NULL in existing rows, and a NULL column does not enter a row's MAC, so rows
-- authenticated by schema 5 stay authentic. Both are covered by the account row's MAC: a file
-- edited without the key cannot send an account's token to another host.

-- Space-separated `host[:port][/path-prefix]` entries, lowercase host; NULL: none.
ALTER TABLE accounts ADD COLUMN credential_hosts TEXT;
-- The user name the helpers answer with (git's `username`, docker's `Username`); NULL: oauth2.
ALTER TABLE accounts ADD COLUMN credential_username TEXT;
