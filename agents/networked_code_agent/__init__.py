"""The `networked_code_agent` method profile: a code agent on the host network, declared."""
