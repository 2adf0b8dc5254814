"""The provider gateway: a confined agent's only route to its model provider, metered, the
key kept outside."""
