"""Provides test harnesses for real components: OpenSSH servers and local Ray clusters."""
