"""inbound"""
