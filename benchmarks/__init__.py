"""Benchmarks: trio_relay against an asyncio baseline of the design it replaces."""
