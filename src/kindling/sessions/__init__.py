"""kindling.sessions."""
