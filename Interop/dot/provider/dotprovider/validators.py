from oauth2_provider.oauth2_validators import OAuth2Validator


class ClaimsValidator(OAuth2Validator):
    """Adds preferred_username (scope profile) and email (scope email) to the ID
    token and userinfo. `sub` stays DOT's default: the user's primary key ("1")."""

    # Request-agnostic form (no request argument): DOT then also lists these
    # claims in the discovery document's claims_supported.
    def get_additional_claims(self):
        return {
            "preferred_username": lambda request: request.user.get_username(),
            "email": lambda request: request.user.email,
        }
