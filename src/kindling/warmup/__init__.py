"""kindling.warmup."""
