"""How a decision crosses to an actor: observation documents and PNGs, the mailbox
transport, the in-process one.
"""
