"""API client: config loading, the QPS/burst limiter, request metrics, typed errors."""
