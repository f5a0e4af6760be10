-- CredentialVault schema version 10: the loopback redirect URI an account's provider
-- registered (issue 28), so `vault login --account A` signs in again with the URI the provider
-- accepts.
--
-- NULL in existing rows (the default, http://127.0.0.1/callback with any port), and a NULL
-- column does not enter a row's MAC, so rows authenticated by schema 9 stay authentic. The
-- account row's MAC covers it: an edited file cannot send the browser's redirect elsewhere
-- (and the sign-in accepts only loopback URIs of this machine, whatever the column says).

-- As given to `--redirect-uri`: http://127.0.0.1[:port]/path, http://[::1][:port]/path or
-- http://localhost[:port]/path; no port means any free one.
ALTER TABLE accounts ADD COLUMN redirect_uri TEXT;
