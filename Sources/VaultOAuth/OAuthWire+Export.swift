// The parsed shapes of what an OAuth server sends (`TokenResponse`, `OAuthError`…) live in
// OAuthWire, a module of Foundation alone that the fuzz targets build by itself; every user of
// VaultOAuth sees them as before.
@_exported import OAuthWire
