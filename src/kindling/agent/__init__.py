"""kindling.agent."""
