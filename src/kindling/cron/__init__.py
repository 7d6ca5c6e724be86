"""kindling.cron."""
