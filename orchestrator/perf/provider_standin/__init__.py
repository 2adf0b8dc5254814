"""Test support for real agent CLIs as actors: stand-in model providers on 127.0.0.1 and
the scripted mailbox driver that plays their model."""
