"""Stand-in model providers on 127.0.0.1 (Anthropic's, OpenAI's and Gemini's APIs) and
the scripted mailbox driver that plays their model: what the agent-CLI bench and the
tests run the real agent CLIs against, with no model behind them."""
