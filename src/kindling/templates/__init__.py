"""kindling.templates."""
