"""kindling.integrations."""
