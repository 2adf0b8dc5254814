"""How a decision crosses to an actor: observations, the mailbox transport, in-process calls."""
