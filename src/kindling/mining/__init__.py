"""kindling.mining."""
