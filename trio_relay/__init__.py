"""trio_relay: the gateway side of a chat relay, on Trio."""
