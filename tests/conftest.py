"""Shared test configuration. The plugin itself is loaded through its pytest11 entry point."""
