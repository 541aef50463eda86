"""pytest plugin (placeholder until the plugin lands): registered through the pytest11 entry point."""
