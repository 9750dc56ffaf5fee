"""Where a cluster's memory goes: each node's host memory against Ray's kill threshold with its trend
(`watch`), the biggest processes, and every out-of-memory kill (`report`)."""
