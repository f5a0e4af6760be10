-- CredentialVault schema version 14: accounts that are clients, not people (issue 34).
--
-- A daemon signs in with the client credentials grant (RFC 6749 §4.4): no user, no refresh
-- token; its tokens are obtained again with the client's own credentials when due. Such a
-- client authenticates with a secret (HTTP Basic, or in the form body) or with a key it signs
-- a short-lived assertion with (RFC 7523 `private_key_jwt`).
--
-- The accounts table's `CHECK (client_auth IN ('none', 'client_secret_basic'))` dates from
-- schema 1. Rebuilding the table to widen it would cascade into every child table under the
-- foreign keys each migration runs with, so the methods added since live in columns of their
-- own. Every column here is NULL in existing rows, and a NULL column does not enter the row's
-- MAC, so rows authenticated by schema 13 stay authentic; the account row's MAC covers each once
-- set.
--
-- `grant_type`: how the account's tokens are obtained when none is valid; NULL: a person's
-- grant, refreshed with its refresh token.
ALTER TABLE accounts ADD COLUMN grant_type TEXT CHECK (grant_type IN ('client_credentials'));
-- `client_auth_method`: the client authentication when it is one `client_auth` cannot hold;
-- NULL: `client_auth` says. Rows that set it keep `client_auth` at 'none'.
ALTER TABLE accounts ADD COLUMN client_auth_method TEXT CHECK (client_auth_method IN ('client_secret_post', 'private_key_jwt'));
-- `client_signing_key`: for private_key_jwt, the client's P-256 private key (PEM), sealed with the
-- account's data key like its client secret; the public half is registered with the provider.
ALTER TABLE accounts ADD COLUMN client_signing_key BLOB;
