"""kindling.review."""
