"""One router per resource: confirmations, admin (tokens, whitelist), health, the web page."""
