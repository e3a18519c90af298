"""Test helpers users can import: a reference connector."""
