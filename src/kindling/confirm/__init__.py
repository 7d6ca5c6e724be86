"""kindling.confirm."""
