-- CredentialVault schema version 10: what an account's provider needs of this machine that
-- discovery cannot tell (issue 28): the loopback redirect URI it registered, and the
-- certificate authorities its TLS chains to.
--
-- NULL in existing rows, and a NULL column does not enter a row's MAC, so rows authenticated by
-- schema 9 stay authentic. The account row's MAC covers both: an edited file cannot send the
-- browser's redirect elsewhere or make the vault trust another authority for the account (and
-- a sign-in accepts only loopback redirect URIs of this machine, whatever the column says;
-- pins, when the account has them, apply on top of any authority).

-- As given to `vault login --redirect-uri`: http://127.0.0.1[:port]/path, http://[::1][:port]/path
-- or http://localhost[:port]/path; no port means any free one. NULL: http://127.0.0.1/callback.
ALTER TABLE accounts ADD COLUMN redirect_uri TEXT;

-- The absolute path of a PEM bundle, as given to `vault login --ca-file` (or `accounts add`):
-- the account's refreshes, revocations and device requests trust it, in every process that
-- serves its token (the agent, cron, git), without the flag or SSL_CERT_FILE there.
-- NULL: the process's trust roots (--ca-file, SSL_CERT_FILE, else the system's).
ALTER TABLE accounts ADD COLUMN ca_file TEXT;
